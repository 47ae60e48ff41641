package neuroglancer_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
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
	ch := cache.New(256 << 20)
	var out []*zvf.Store
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".zarrvectors")
		bs, err := blobstore.Open(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		st, err := zvf.Open(context.Background(), bs, zvf.Options{Name: name, Cache: ch})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = bs.Close() })
		out = append(out, st)
	}
	return out
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
	srv, err := api.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return srv, ts
}

// get fetches path with header name/value pairs and returns the answer
// with its body (decoded by the client when it asked for no encoding).
func get(t testing.TB, ts *httptest.Server, path string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	return do(t, ts, http.MethodGet, path, hdr...)
}

func do(t testing.TB, ts *httptest.Server, method, path string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// mustGet is get that fails the test unless the answer is 200.
func mustGet(t testing.TB, ts *httptest.Server, path string) []byte {
	t.Helper()
	resp, b := get(t, ts, path)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %.300s", path, resp.StatusCode, b)
	}
	return b
}
