package neuroglancer_test

import (
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/klauspost/compress/zstd.(*blockDec).startDecoder"),
		goleak.IgnoreAnyFunction("github.com/klauspost/compress/zstd.(*Decoder).startStreamDecoder"))
}

const fixtures = "../../testdata/zvf-reference"

// fixtureStores opens every reference store.
func fixtureStores(t testing.TB) []*zvf.Store {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(fixtures, "*.zarrvectors"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures in %s: %v", fixtures, err)
	}
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = strings.TrimSuffix(filepath.Base(p), ".zarrvectors")
	}
	return apitest.OpenFixtures(t, fixtures, names...)
}

func storeNamed(t testing.TB, stores []*zvf.Store, name string) *zvf.Store {
	t.Helper()
	for _, s := range stores {
		if s.Name() == name {
			return s
		}
	}
	t.Fatalf("no store %s", name)
	return nil
}

// newServer serves stores through the API (the /ng routes included).
func newServer(t testing.TB, o api.Options) (*api.Server, *httptest.Server) {
	t.Helper()
	if o.Cache == nil {
		o.Cache = cache.New(256 << 20)
	}
	return apitest.Serve(t, o)
}
