package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/demo"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
)

// demoStores builds the built-in demo (small) once per test binary.
var demoStores = sync.OnceValues(func() ([]*zvf.Store, error) {
	_, stores, _, err := buildDemo(demo.Options{Seed: 1, Scale: 1})
	return stores, err
})

// buildDemo writes the demo scene of o into a memory bucket and opens its
// stores, which share one cache.
func buildDemo(o demo.Options) (storage.Writer, []*zvf.Store, *cache.Cache, error) {
	ctx := context.Background()
	mem, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		return nil, nil, nil, err
	}
	infos, err := demo.Build(ctx, mem, o)
	if err != nil {
		return nil, nil, nil, err
	}
	ch := cache.New(128 << 20)
	var out []*zvf.Store
	for _, in := range infos {
		s, err := zvf.Open(ctx, storage.Sub(mem, in.Prefix), zvf.Options{Name: in.Name, Cache: ch})
		if err != nil {
			return nil, nil, nil, err
		}
		out = append(out, s)
	}
	return mem, out, ch, nil
}

func demoServer(t *testing.T, o api.Options) *api.Server {
	t.Helper()
	stores, err := demoStores()
	if err != nil {
		t.Fatal(err)
	}
	o.Stores = stores
	srv := apitest.New(t, o)
	return srv
}

func problemOf(t *testing.T, code int, body []byte) api.Problem {
	t.Helper()
	var p api.Problem
	if err := json.Unmarshal(body, &p); err != nil || p.Status != code {
		t.Fatalf("not a problem with status %d: %s", code, body)
	}
	return p
}

// TestChunkRoutesUseTheirLevel: /levels/{level}/chunks answers that level
// (it answered level 0 for every level, and for levels/abc, levels/-1 and
// levels/99999999999999999999), and a level= query on these routes is an
// unknown parameter, not a silent override.
func TestChunkRoutesUseTheirLevel(t *testing.T) {
	t.Parallel()
	srv := demoServer(t, api.Options{})
	stores, _ := demoStores()
	var cells *zvf.Store
	for _, s := range stores {
		if s.Name() == "cells" {
			cells = s
		}
	}
	for _, n := range cells.Levels() {
		l, _ := cells.Level(n)
		code, _, body := serve(t, srv.Handler(), "/api/v1/stores/cells/levels/"+strconv.Itoa(n)+"/chunks")
		var got struct {
			Level  int      `json:"level"`
			Count  int      `json:"count"`
			Chunks []string `json:"chunks"`
		}
		if code != 200 || json.Unmarshal(body, &got) != nil || got.Level != n || got.Count != len(l.Keys()) {
			t.Fatalf("level %d: %d %.200s (want %d chunks)", n, code, body, len(l.Keys()))
		}
		key := got.Chunks[0]
		code, _, body = serve(t, srv.Handler(), "/api/v1/stores/cells/levels/"+strconv.Itoa(n)+"/chunks/"+key)
		var tile struct {
			Level int `json:"level"`
		}
		if code != 200 || json.Unmarshal(body, &tile) != nil || tile.Level != n {
			t.Fatalf("level %d chunk %s: %d %.200s", n, key, code, body)
		}
	}
	for path, want := range map[string]int{
		"/api/v1/stores/cells/levels/abc/chunks":                  400,
		"/api/v1/stores/cells/levels/-1/chunks":                   400,
		"/api/v1/stores/cells/levels/01/chunks":                   400,
		"/api/v1/stores/cells/levels/99999999999999999999/chunks": 400,
		"/api/v1/stores/cells/levels/7/chunks":                    404,
		"/api/v1/stores/cells/levels/0/chunks/0.0.0?level=2":      400,
		"/api/v1/stores/cells/levels/abc/chunks/0.0.0":            400,
	} {
		code, _, body := serve(t, srv.Handler(), path)
		if code != want {
			t.Errorf("%s: %d, want %d: %s", path, code, want, body)
			continue
		}
		problemOf(t, code, body)
	}
}

// TestLevelAutoHonoursAttributes: level=auto with attributes chooses among
// the levels that hold them. The demo's cells have cell_type at level 0
// only; auto used to pick level 1 and answer 404 "no vertex attribute".
func TestLevelAutoHonoursAttributes(t *testing.T) {
	t.Parallel()
	srv := demoServer(t, api.Options{})
	const box = "/api/v1/stores/cells/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&level=auto&limit=100"
	code, _, body := serve(t, srv.Handler(), box)
	var p struct {
		Level int `json:"level"`
	}
	if code != 200 || json.Unmarshal(body, &p) != nil {
		t.Fatalf("no attributes: %d %.200s", code, body)
	}
	if p.Level == 0 {
		t.Fatal("auto chose level 0 for a whole-store box with a 100-vertex budget, so the test proves nothing")
	}
	stores, _ := demoStores()
	for _, s := range stores {
		if s.Name() != "cells" {
			continue
		}
		l, _ := s.Level(p.Level)
		for _, a := range l.Info().VertexAttributes {
			if a.Name == "cell_type" {
				t.Fatalf("level %d has cell_type, so the test proves nothing", p.Level)
			}
		}
	}
	code, _, body = serve(t, srv.Handler(), box+"&attributes=cell_type")
	if code != 200 || json.Unmarshal(body, &p) != nil || p.Level != 0 || !strings.Contains(string(body), `"cell_type"`) {
		t.Fatalf("attributes=cell_type: %d %.300s", code, body)
	}
	code, _, body = serve(t, srv.Handler(), box+"&attributes=nope")
	if code != 404 || !strings.Contains(problemOf(t, code, body).Detail, "nope") {
		t.Fatalf("unknown attribute: %d %s", code, body)
	}
}

// TestLimitIsClamped: a limit above the server's maximum is clamped and
// paged (OGC API – Features), not refused with 413; every page says how
// many it holds, the next page's cursor, and the last one how many the
// box holds in all — as headers, or as trailers when the answer streams.
func TestLimitIsClamped(t *testing.T) {
	t.Parallel()
	// A binary page of 10,000 rows (vertices and object ids, 20 bytes a
	// row) is under 256 KiB. (One of 20,000, 400 kB, streamed too: its
	// counts were sent as headers only because it started at its end.)
	const max = 10_000
	srv := demoServer(t, api.Options{MaxVertices: max})
	ts := newHTTPServer(t, srv)
	const box = "/api/v1/stores/cells/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9"
	stores, _ := demoStores()
	var total int64
	for _, s := range stores {
		if s.Name() == "cells" {
			total = s.Info().Levels[0].VertexCount
		}
	}
	if total <= 2*max {
		t.Fatalf("the demo's cells have %d vertices, so the test proves nothing", total)
	}
	// NDJSON with every attribute streams (past the 256 KiB held back),
	// the binary answer without attributes is held back whole.
	for _, f := range []string{"ndjson&attributes=*", "bin"} {
		url := ts.URL + box + "&limit=99999999&f=" + f
		streamed := false
		var seen int64
		for page := 0; url != ""; page++ {
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			req.Header.Set("Accept-Encoding", "identity") // so the NDJSON pages stream
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s page %d: %d %v %.200s", f, page, resp.StatusCode, err, body)
			}
			// Small answers carry them as headers, streamed ones as trailers.
			get := func(k string) string {
				if v := resp.Header.Get(k); v != "" {
					return v
				}
				return resp.Trailer.Get(k)
			}
			if resp.Header.Get("X-Vertex-Count") == "" {
				streamed = true
			}
			n, err := strconv.ParseInt(get("X-Vertex-Count"), 10, 64)
			if err != nil || n <= 0 || n > max {
				t.Fatalf("%s page %d: X-Vertex-Count %q", f, page, get("X-Vertex-Count"))
			}
			seen += n
			url = ""
			if next := get("X-Next-Cursor"); next != "" {
				if !strings.Contains(get("Link"), `rel="next"`) {
					t.Fatalf("%s page %d: Link %q", f, page, get("Link"))
				}
				url = ts.URL + box + "&limit=99999999&f=" + f + "&cursor=" + next
			} else if get("X-Number-Matched") != strconv.FormatInt(total, 10) {
				t.Fatalf("%s last page: X-Number-Matched %q, want %d", f, get("X-Number-Matched"), total)
			}
			if page > 100 {
				t.Fatal("paging does not end")
			}
		}
		if seen != total {
			t.Fatalf("%s: pages hold %d vertices, the store %d", f, seen, total)
		}
		if streamed != strings.HasPrefix(f, "ndjson") {
			t.Fatalf("%s: streamed=%v, so a path is untested", f, streamed)
		}
	}
}

func newHTTPServer(t *testing.T, srv *api.Server) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// TestUnknownParameters: a mistyped parameter is a 400 that names it, says
// what it probably meant and lists the valid ones (it used to be ignored,
// answering 200 with defaults); f behaves alike on every route; values
// outside a parameter's list and repeated parameters are refused.
func TestUnknownParameters(t *testing.T) {
	t.Parallel()
	srv := demoServer(t, api.Options{})
	for _, tc := range []struct {
		path     string
		contains []string
	}{
		{"/api/v1/stores/cells/bbox?min=0,0,0&max=1,1,1&levle=2", []string{"levle", "did you mean level?", "attributes, connectivity, cursor, edge_attributes, f, filter, filter-lang, level, limit, max, min, precision, sample, table"}},
		{"/api/v1/stores/cells/bbox?min=0,0,0&max=1,1,1&attribute=cell_type", []string{"attribute ", "did you mean attributes?"}},
		{"/api/v1/stores/cells/bbox?min=0,0,0&max=1,1,1&format=ndjson", []string{"format", "did you mean f?"}},
		{"/api/v1/stores/cells/bbox?min=0,0,0&max=1,1,1&connectivity=maybe", []string{`connectivity="maybe"`, "true or false"}},
		{"/api/v1/stores/cells/bbox?min=0,0,0&max=1,1,1&f=xml", []string{`f="xml"`}},
		{"/api/v1/stores?f=xml", []string{`f="xml"`, "json"}},
		{"/api/v1/stores?f=bin", []string{`f="bin"`}},
		{"/api/v1/stores/cells?levle=1", []string{"levle", "takes f"}},
		{"/api/v1/stores/cells/objects/1/levels?level=1", []string{"level"}},
		{"/api/v1/stores/cells/bbox?min=0,0,0&max=1,1,1&min=2,2,2", []string{"min", "given 2 times"}},
		{"/api/v1/stores/cells/bbox?f=json&min=0,0,0&f=bin&max=1,1,1&f=csv", []string{"parameter f is given 3 times"}},
	} {
		code, _, body := serve(t, srv.Handler(), tc.path)
		if code != 400 {
			t.Errorf("%s: %d %s", tc.path, code, body)
			continue
		}
		p := problemOf(t, code, body)
		for _, c := range tc.contains {
			if !strings.Contains(p.Detail, c) {
				t.Errorf("%s: detail %q lacks %q", tc.path, p.Detail, c)
			}
		}
	}
	for _, ok := range []string{"/api/v1/stores?f=json", "/api/v1/stores/cells?f=json", "/api/v1/stores/cells/bbox?min=0,0,0&max=1,1,1&f=ndjson&connectivity=false"} {
		if code, _, body := serve(t, srv.Handler(), ok); code != 200 {
			t.Errorf("%s: %d %s", ok, code, body)
		}
	}
}

// TestUnknownStoreSaysWhichWasMeant: a misspelt store name in a path (the
// API's and Neuroglancer's) was a 404 "no store \"cels\"", leaving the user
// to look the names up; now it names the store meant, if one is near, and
// where the names are listed.
func TestUnknownStoreSaysWhichWasMeant(t *testing.T) {
	t.Parallel()
	srv := demoServer(t, api.Options{})
	for _, tc := range []struct{ path, detail string }{
		{"/api/v1/stores/cels/bbox?min=0,0,0&max=1,1,1", `no store "cels" (did you mean cells?); GET /api/v1/stores lists the stores`},
		{"/api/v1/stores/skeleton", `no store "skeleton" (did you mean skeletons?); GET /api/v1/stores lists the stores`},
		{"/ng/axon/annotations/info", `no store "axon" (did you mean axons?); GET /api/v1/stores lists the stores`},
		{"/api/v1/stores/brain", `no store "brain"; GET /api/v1/stores lists the stores`},
	} {
		code, _, body := serve(t, srv.Handler(), tc.path)
		if p := problemOf(t, code, body); code != 404 || p.Detail != tc.detail {
			t.Errorf("%s: %d %q, want 404 %q", tc.path, code, p.Detail, tc.detail)
		}
	}
}

// TestMistakesSayWhatWasMeant: a box given corners the wrong way round
// said "min[0] > max[0]", and a misspelt attribute "no vertex attribute
// \"celltype\" at level 0"; each now says the values, or the names the
// level has and the one probably meant.
func TestMistakesSayWhatWasMeant(t *testing.T) {
	t.Parallel()
	srv := demoServer(t, api.Options{})
	for _, tc := range []struct {
		path   string
		status int
		detail string
	}{
		{"/api/v1/stores/cells/bbox?min=10,0,0&max=0,10,10", 400, "min[0] = 10 is greater than max[0] = 0: min is the box's lower corner, max its upper"},
		{"/api/v1/stores/cells/bbox?min=0,0,0&max=10,10,10&attributes=celltype", 404, `no vertex attribute "celltype" at level 0 (did you mean cell_type?); level 0 has cell_type, intensity`},
		{"/api/v1/stores/cells/objects/3?attributes=colour", 404, `store "cells" level 0: no vertex attribute "colour" at level 0; level 0 has cell_type, intensity`},
	} {
		code, _, body := serve(t, srv.Handler(), tc.path)
		if p := problemOf(t, code, body); code != tc.status || p.Detail != tc.detail {
			t.Errorf("%s: %d %q, want %d %q", tc.path, code, p.Detail, tc.status, tc.detail)
		}
	}
}

// TestParameterTableMatchesSpec: the parameter table the server checks
// requests against and the parameters openapi.yaml documents are the same,
// route by route, and every API route is in both.
func TestParameterTableMatchesSpec(t *testing.T) {
	t.Parallel()
	spec, _ := loadSpec(t)
	table := api.RouteParams()
	documented := map[string][]string{}
	for path, item := range spec.Paths.Map() {
		if !strings.HasPrefix(path, "/api/") || item.Get == nil {
			continue
		}
		var names []string
		for _, ps := range append(append(openapi3.Parameters{}, item.Parameters...), item.Get.Parameters...) {
			if ps.Value != nil && ps.Value.In == "query" {
				names = append(names, ps.Value.Name)
			}
		}
		sort.Strings(names)
		documented[path] = names
	}
	for route, names := range table {
		if got, ok := documented[route]; !ok {
			t.Errorf("%s is not in openapi.yaml", route)
		} else if !slices.Equal(got, names) {
			t.Errorf("%s: openapi.yaml documents %v, the server takes %v", route, got, names)
		}
	}
	for path := range documented {
		if _, ok := table[path]; !ok {
			t.Errorf("%s is documented but has no parameter entry", path)
		}
	}
}

// TestEveryRouteAtEveryLevel: every route family that takes a level
// answers the level it was asked for, at every level of every demo store
// (a chunk route answered level 0 for every level, and no test looked
// above level 0).
func TestEveryRouteAtEveryLevel(t *testing.T) {
	t.Parallel()
	srv := demoServer(t, api.Options{})
	stores, _ := demoStores()
	levelOf := func(path string) (int, bool) {
		t.Helper()
		code, _, body := serve(t, srv.Handler(), path)
		if code == 404 {
			return 0, false
		}
		var v struct {
			Level *int `json:"level"`
		}
		if code != 200 || json.Unmarshal(body, &v) != nil || v.Level == nil {
			t.Fatalf("%s: %d %.200s", path, code, body)
		}
		return *v.Level, true
	}
	checked := 0
	for _, st := range stores {
		base := "/api/v1/stores/" + st.Name()
		for _, n := range st.Levels() {
			ls := strconv.Itoa(n)
			l, _ := st.Level(n)
			paths := []string{base + "/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&limit=5&level=" + ls, base + "/levels/" + ls + "/chunks",
				base + "/levels/" + ls + "/chunks/" + l.Keys()[0].String()}
			if l.Info().ObjectCount > 0 {
				paths = append(paths, base+"/objects/3?level="+ls, base+"/objects/3/manifest?level="+ls)
			}
			if l.Info().GroupCount > 0 {
				paths = append(paths, base+"/groups/0?level="+ls)
			}
			for _, p := range paths {
				got, ok := levelOf(p)
				if !ok {
					continue // the object or group is not at this level
				}
				if got != n {
					t.Errorf("%s answered level %d", p, got)
				}
				checked++
			}
		}
	}
	if checked < 30 {
		t.Fatalf("only %d answers checked", checked)
	}
}

// TestRouteTableIsWhatIsMounted: every /api/ route the router serves is
// in the parameter table and every table route is served, so a route
// cannot be added beside the table (unchecked parameters, undocumented).
func TestRouteTableIsWhatIsMounted(t *testing.T) {
	t.Parallel()
	srv := demoServer(t, api.Options{})
	table := api.RouteParams()
	mounted := map[string]bool{}
	err := chi.Walk(api.MountedRouter(srv), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if method == http.MethodGet && strings.HasPrefix(route, "/api/") {
			mounted[strings.TrimSuffix(route, "/")] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for route := range mounted {
		if _, ok := table[route]; !ok {
			t.Errorf("%s is served but not in the route table", route)
		}
	}
	for route := range table {
		if !mounted[route] {
			t.Errorf("%s is in the route table but not served", route)
		}
	}
}

// TestURITooLongSaysTheLimit: a query string or path past the server's
// bound is refused with 414 and a problem whose detail says which part
// and what the bound is (it had none; FuzzQuestions' corpus holds the
// case that found it).
func TestURITooLongSaysTheLimit(t *testing.T) {
	t.Parallel()
	srv := demoServer(t, api.Options{})
	for _, tc := range []struct {
		path, want string
	}{
		{"/api/v1/stores/cells/bbox?min=" + strings.Repeat("1", 5000), "query string of 5004 bytes; at most 4096"},
		{"/api/v1/stores/" + strings.Repeat("c", 1100) + "/bbox", "path of 1120 bytes; at most 1024"},
	} {
		code, ct, body := serve(t, srv.Handler(), tc.path)
		if p := problemOf(t, code, body); code != 414 || ct != "application/problem+json" || !strings.Contains(p.Detail, tc.want) {
			t.Errorf("%.60s…: %d %s %s, want 414 saying %q", tc.path, code, ct, body, tc.want)
		}
	}
}
