package neuroglancer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

func TestMain(m *testing.M) {
	zvftest.CollectLess()
	goleak.VerifyTestMain(largeIDsRemoved{m}, goleak.IgnoreTopFunction("github.com/klauspost/compress/zstd.(*blockDec).startDecoder"),
		goleak.IgnoreAnyFunction("github.com/klauspost/compress/zstd.(*Decoder).startStreamDecoder"))
}

// largeIDsRemoved runs the tests, then removes the folders largeIDDirs
// built for all of them.
type largeIDsRemoved struct{ m *testing.M }

func (r largeIDsRemoved) Run() int {
	code := r.m.Run()
	if dir, err := largeIDDirs(); err == nil {
		if err := os.RemoveAll(filepath.Dir(dir[0])); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return max(code, 1)
		}
	}
	return code
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

// largeIDStores are ZVF 0.9.2 stores whose object index names objects by
// connectomics-sized ids, above 2^60 (neither int32 nor float64 holds
// them), in descending order: the 0.9 fixtures with objects of each
// annotation kind, renamed big_<fixture>.
func largeIDStores(t testing.TB) []*zvf.Store { return idStores(t, 0, "big_") }

// hugeIDStores are largeIDStores whose ids straddle 2^63: every other
// object's id is 2^63 or more (a negative int64 in ZVF, a uint64 segment
// id to Neuroglancer), the others below 2^63 and above 2^62, so that the
// ids sort differently as int64 and as uint64. Named huge_<fixture>.
func hugeIDStores(t testing.TB) []*zvf.Store { return idStores(t, len(largeIDFixtures), "huge_") }

// idStores opens the id stores of largeIDDirs from first, named prefix
// and the fixture's name.
func idStores(t testing.TB, first int, prefix string) []*zvf.Store {
	t.Helper()
	dirs, err := largeIDDirs()
	if err != nil {
		t.Fatal(err)
	}
	ch := cache.New(64 << 20)
	var out []*zvf.Store
	for i, f := range largeIDFixtures {
		out = append(out, apitest.Open(t, dirs[first+i], prefix+strings.TrimSuffix(f, "_v09"), ch))
	}
	return out
}

// hugeID is the id of the i-th object of a hugeIDStores store.
func hugeID(i int64) int64 {
	if i%2 == 0 {
		return int64(uint64(1)<<63 + 7 + 1_000_003*uint64(i))
	}
	return 1<<62 + 1_000_003*i
}

var largeIDFixtures = []string{"points_pyramid_v09", "streamlines_v09", "graph_v09"}

// largeIDDirs builds the folders of largeIDStores once for the package's
// tests, which only read them (copying the fixtures cost more than the
// tests reading them).
var largeIDDirs = sync.OnceValues(func() ([]string, error) {
	base, err := os.MkdirTemp("", "largeid")
	if err != nil {
		return nil, err
	}
	var dirs []string
	for k, f := range append(append([]string{}, largeIDFixtures...), largeIDFixtures...) {
		src := filepath.Join("../../testdata/zvf-0.9", f+".zarrvectors")
		n, err := objectCount(src)
		if err != nil {
			return nil, err
		}
		ids := make([]int64, n)
		prefix := "large_"
		for row := range ids {
			ids[row] = largeID(n - 1 - int64(row))
			if k >= len(largeIDFixtures) {
				ids[row], prefix = hugeID(n-1-int64(row)), "huge_"
			}
		}
		dir := filepath.Join(base, prefix+filepath.Base(src))
		if err := zvftest.CopyDir(src, dir); err != nil {
			return nil, err
		}
		if err := zvftest.WriteObjectIDsTo(dir, ids); err != nil {
			return nil, err
		}
		dirs = append(dirs, dir)
	}
	return dirs, nil
})

// objectCount is the number of objects of level 0 of the store at dir.
func objectCount(dir string) (int64, error) {
	ctx := context.Background()
	st, err := blobstore.Open(ctx, dir)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	s, err := zvf.Open(ctx, st, zvf.Options{Cache: cache.New(8 << 20)})
	if err != nil {
		return 0, err
	}
	return s.Info().Levels[0].ObjectCount, nil
}

// largeID is the id of the i-th object of a largeIDStores store.
func largeID(i int64) int64 { return 1<<60 + 1 + 1_000_003*i }

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

// A problemCase is a request and the problem it must be answered with.
type problemCase struct {
	path     string
	status   int
	contains string // in the problem's detail
}

// wantProblems GETs each case's path and checks that the answer is a
// problem+json of the case's status whose detail names what is wrong.
func wantProblems(t *testing.T, ts *httptest.Server, cases []problemCase) {
	t.Helper()
	for _, tc := range cases {
		resp, body := apitest.Get(t, ts, tc.path)
		var p api.Problem
		if resp.StatusCode != tc.status || json.Unmarshal(body, &p) != nil || resp.Header.Get("Content-Type") != "application/problem+json" ||
			!strings.Contains(p.Detail, tc.contains) {
			t.Errorf("%s: %d %s, want %d with %q", tc.path, resp.StatusCode, body, tc.status, tc.contains)
		}
	}
}
