package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
)

// sharedDemo is the demo stores the query tests share, written once.
var sharedDemo struct {
	once sync.Once
	dir  string
	err  error
}

// demoDir writes the demo stores (about 14,000 cells: a JSON answer of
// several hundred KiB, past the server's 256 KiB hold-back) into a
// temporary folder once for the tests that only read them; TestMain
// removes it.
func demoDir(t *testing.T) string {
	t.Helper()
	sharedDemo.once.Do(func() {
		var parent string
		if parent, sharedDemo.err = os.MkdirTemp("", "zvfserve-test-demo-"); sharedDemo.err != nil {
			return
		}
		sharedDemo.dir = filepath.Join(parent, "demo")
		var out, errs bytes.Buffer
		if code := run(context.Background(), []string{"demo", "--scale", "0.3", sharedDemo.dir}, &out, &errs); code != 0 {
			sharedDemo.err = fmt.Errorf("demo: exit %d: %s", code, errs.String())
		}
	})
	if sharedDemo.err != nil {
		t.Fatal(sharedDemo.err)
	}
	return sharedDemo.dir
}

// httpServer serves the store at path under its command-line name, as
// "zvfserve serve PATH" would.
func httpServer(t *testing.T, path string) *httptest.Server {
	t.Helper()
	name, target := storeArg(path)
	_, ts := apitest.Serve(t, api.Options{Stores: []*zvf.Store{apitest.Open(t, target, name, cache.New(64<<20))}})
	return ts
}

// TestQueryMatchesHTTP: query prints exactly the body GET returns, in every
// format, for answers below and above the server's 256 KiB hold-back.
func TestQueryMatchesHTTP(t *testing.T) {
	t.Parallel()
	cells := filepath.Join(demoDir(t), "cells")
	ts := httpServer(t, cells)
	graph := "../../testdata/zvf-reference/graph.zarrvectors"
	tg := httpServer(t, graph)
	for _, tc := range []struct {
		name string
		ts   *httptest.Server
		args []string
		path string
	}{
		{"small json", tg, []string{"query", graph, "--bbox", "390,223,585,480,313,675"}, "/api/v1/stores/graph/bbox?min=390,223,585&max=480,313,675&level=0&f=json"},
		{"small ndjson", tg, []string{"query", graph, "--bbox", "390,223,585,480,313,675", "--f", "ndjson"}, "/api/v1/stores/graph/bbox?min=390,223,585&max=480,313,675&level=0&f=ndjson"},
		{"small bin", tg, []string{"query", graph, "--bbox", "390,223,585,480,313,675", "--f", "bin"}, "/api/v1/stores/graph/bbox?min=390,223,585&max=480,313,675&level=0&f=bin"},
		{"large json", ts, []string{"query", cells, "--bbox", "0,0,0,1000,1000,600", "--attributes", "*"}, "/api/v1/stores/cells/bbox?min=0,0,0&max=1000,1000,600&level=0&attributes=*&f=json"},
		{"large ndjson", ts, []string{"query", cells, "--bbox", "0,0,0,1000,1000,600", "--attributes", "*", "--f", "ndjson"}, "/api/v1/stores/cells/bbox?min=0,0,0&max=1000,1000,600&level=0&attributes=*&f=ndjson"},
		{"large bin", ts, []string{"query", cells, "--bbox", "0,0,0,1000,1000,600", "--attributes", "*", "--f", "bin"}, "/api/v1/stores/cells/bbox?min=0,0,0&max=1000,1000,600&level=0&attributes=*&f=bin"},
		{"paged", ts, []string{"query", cells, "--bbox", "0,0,0,1000,1000,600", "--limit", "100"}, "/api/v1/stores/cells/bbox?min=0,0,0&max=1000,1000,600&level=0&limit=100&f=json"},
		{"object", tg, []string{"query", graph, "--object", "0"}, "/api/v1/stores/graph/objects/0?level=0&f=json"},
		{"object bin", ts, []string{"query", cells, "--object", "7", "--level", "1", "--attributes", "*", "--f", "bin"}, "/api/v1/stores/cells/objects/7?level=1&attributes=*&f=bin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := runCmd(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			want := apitest.MustGet(t, tc.ts, tc.path)
			if !bytes.Equal([]byte(out), want) {
				t.Fatalf("query printed %d bytes, GET returned %d:\n%.300s\n%.300s", len(out), len(want), out, want)
			}
		})
	}
}

// pages follows a paged bbox answer over HTTP and returns every page.
func pages(t *testing.T, ts *httptest.Server, path string) [][]byte {
	t.Helper()
	var out [][]byte
	for cursor := ""; ; {
		p := path
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		b := apitest.MustGet(t, ts, p)
		out = append(out, b)
		var page struct {
			Next *string `json:"next"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			t.Fatal(err)
		}
		if page.Next == nil {
			return out
		}
		cursor = *page.Next
		if len(out) > 1000 {
			t.Fatal("paging does not end")
		}
	}
}

// TestQueryPaging: a page's next cursor continues with --cursor, and --all
// streams every page, each exactly as GET returns it.
func TestQueryPaging(t *testing.T) {
	t.Parallel()
	cells := filepath.Join(demoDir(t), "cells")
	ts := httpServer(t, cells)
	const box = "0,0,0,1000,1000,600"
	want := pages(t, ts, "/api/v1/stores/cells/bbox?min=0,0,0&max=1000,1000,600&level=0&limit=3000&f=json")
	if len(want) < 3 {
		t.Fatalf("only %d pages; the test needs several", len(want))
	}
	var first struct {
		Next string `json:"next"`
	}
	if err := json.Unmarshal(want[0], &first); err != nil || first.Next == "" {
		t.Fatalf("first page has no next: %v", err)
	}
	out, errs, code := runCmd(t, "query", cells, "--bbox", box, "--level", "0", "--limit", "3000")
	if code != 0 || out != string(want[0]) {
		t.Fatalf("first page: exit %d %s\n%.200s", code, errs, out)
	}
	if !strings.Contains(errs, "--cursor "+first.Next) {
		t.Errorf("stderr does not say how to continue: %q", errs)
	}
	out, errs, code = runCmd(t, "query", cells, "--bbox", box, "--level", "0", "--limit", "3000", "--cursor", first.Next)
	if code != 0 || out != string(want[1]) {
		t.Fatalf("--cursor: exit %d %s\n%.200s", code, errs, out)
	}
	for _, f := range []string{"json", "ndjson", "bin"} {
		t.Run("all "+f, func(t *testing.T) {
			var all []byte
			if f == "json" {
				// One document, the unpaged answer (cells have no
				// connectivity to come in another order).
				all = apitest.MustGet(t, ts, "/api/v1/stores/cells/bbox?min=0,0,0&max=1000,1000,600&level=0&f=json")
			} else {
				for c := ""; ; {
					path := "/api/v1/stores/cells/bbox?min=0,0,0&max=1000,1000,600&level=0&limit=3000&f=" + f
					if c != "" {
						path += "&cursor=" + url.QueryEscape(c)
					}
					b := apitest.MustGet(t, ts, path)
					all = append(all, b...)
					// The JSON page at the same cursor carries the same next.
					var page struct {
						Next *string `json:"next"`
					}
					jp := strings.Replace(path, "f="+f, "f=json", 1)
					if err := json.Unmarshal(apitest.MustGet(t, ts, jp), &page); err != nil {
						t.Fatal(err)
					}
					if page.Next == nil {
						break
					}
					c = *page.Next
				}
			}
			out, errs, code := runCmd(t, "query", cells, "--bbox", box, "--level", "0", "--limit", "3000", "--all", "--f", f)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if !bytes.Equal([]byte(out), all) {
				t.Fatalf("--all printed %d bytes, want %d", len(out), len(all))
			}
		})
	}
}

// TestQueryAllJSONIsOneDocument: --all in JSON prints one document equal
// to the unpaged answer, for every geometry: the same members in the same
// order with the same values, edges and faces the same tuples (pages carry
// each in the page of its last vertex, so their order differs).
func TestQueryAllJSONIsOneDocument(t *testing.T) {
	t.Parallel()
	dir := demoDir(t)
	for _, store := range []string{"cells", "axons", "skeletons", "meshes"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(dir, store)
			ts := httpServer(t, path)
			want := apitest.MustGet(t, ts, "/api/v1/stores/"+store+"/bbox?min=100,0,50&max=900,700,600&level=0&attributes=*&f=json")
			for _, limit := range []string{"997", "3000"} {
				out, errs, code := runCmd(t, "query", path, "--bbox", "100,0,50,900,700,600", "--attributes", "*", "--limit", limit, "--all")
				if code != 0 {
					t.Fatalf("exit %d: %s", code, errs)
				}
				var w, g map[string]json.RawMessage
				if err := json.Unmarshal(want, &w); err != nil {
					t.Fatal(err)
				}
				dec := json.NewDecoder(strings.NewReader(out))
				if err := dec.Decode(&g); err != nil || dec.More() {
					t.Fatalf("--limit %s --all: not one JSON document (%v):\n%.300s", limit, err, out)
				}
				gm, err := members([]byte(out))
				if err != nil {
					t.Fatal(err)
				}
				wm, _ := members(want)
				key := func(m member) string { return m.key }
				if !slices.EqualFunc(gm, wm, func(a, b member) bool { return key(a) == key(b) }) {
					t.Fatalf("members %v, want those of %.300s", gm, want)
				}
				pages := 0
				for k, v := range w {
					if k == "edges" || k == "faces" {
						var a, b [][]int64
						if json.Unmarshal(v, &a) != nil || json.Unmarshal(g[k], &b) != nil {
							t.Fatalf("%s is not a list of index tuples", k)
						}
						slices.SortFunc(a, slices.Compare)
						slices.SortFunc(b, slices.Compare)
						if len(a) < 50 || !slices.EqualFunc(a, b, slices.Equal) {
							t.Fatalf("--limit %s: %d %s, want %d", limit, len(b), k, len(a))
						}
						pages++
						continue
					}
					if !bytes.Equal(v, g[k]) {
						t.Fatalf("--limit %s: %s is %.200s, want %.200s", limit, k, g[k], v)
					}
				}
				if store != "cells" && pages == 0 {
					t.Fatal("no connectivity to compare")
				}
				// The members in the server's order: the unpaged bytes,
				// but for the order of edges and faces.
				if store == "cells" && out != string(want) {
					t.Fatalf("--limit %s: %d bytes, the unpaged answer %d", limit, len(out), len(want))
				}
			}
		})
	}
}

// TestQueryErrors: mistakes and failures print one plain sentence, not a
// problem document; command-line mistakes exit 2, the rest 1.
func TestQueryErrors(t *testing.T) {
	t.Parallel()
	graph := "../../testdata/zvf-reference/graph.zarrvectors"
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"min above max", []string{"--bbox", "5,0,0,1,1,1"}, 2, "x0 = 5 is greater than x1 = 1"},
		{"not a number", []string{"--bbox", "a,0,0,1,1,1"}, 2, `"a" is not a number`},
		// Corners are decimal numbers, as the API takes them: Go's own
		// syntax passed this check and was refused by the API as min[0].
		{"hexadecimal float", []string{"--bbox", "0x1p4,0,0,100,100,100"}, 2, `--bbox: "0x1p4" is not a number: write decimal numbers`},
		{"digit separator", []string{"--bbox", "0,0,0,1_0,1,1"}, 2, `--bbox: "1_0" is not a number: write decimal numbers`},
		{"short box", []string{"--bbox", "1,2,3"}, 2, "6 numbers"},
		{"no such level", []string{"--bbox", "0,0,0,1,1,1", "--level", "9"}, 1, "no level 9"},
		{"no such attribute", []string{"--bbox", "0,0,0,1,1,1", "--attributes", "nope"}, 1, `no vertex attribute "nope"`},
		{"no such object", []string{"--object", "999999"}, 1, "999999"},
		{"bad cursor", []string{"--bbox", "0,0,0,1,1,1", "--cursor", "bm9wZQ"}, 2, "cursor is not valid for this query"},
		{"bad format", []string{"--bbox", "0,0,0,1,1,1", "--f", "xml"}, 2, "json, ndjson or bin"},
		{"cursor on an object", []string{"--object", "0", "--cursor", "x"}, 2, "--cursor and --all"},
		// It used to be "need one STORE and exactly one of --bbox or
		// --object", as if --object had not been given (its unset value
		// was -1, which --help showed as its default).
		{"negative object", []string{"--object", "-1"}, 2, "--object -1: an object id is 0 or more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := runCmd(t, append([]string{"query", graph}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, errs)
			}
			if out != "" {
				t.Errorf("stdout: %.200s", out)
			}
			if strings.Contains(errs, "{") || strings.Contains(errs, "problem") {
				t.Errorf("not a plain sentence: %q", errs)
			}
			if !strings.Contains(errs, tc.want) {
				t.Errorf("stderr %q does not say %q", errs, tc.want)
			}
			if lines := strings.Count(strings.TrimSpace(errs), "\n"); lines > 0 && tc.code == 1 {
				t.Errorf("%d lines, want one: %q", lines+1, errs)
			}
		})
	}
}

// TestQueryHelpHasNoSentinel: --help describes --object without the
// "(default -1)" of its unset value, which is no object id.
func TestQueryHelpHasNoSentinel(t *testing.T) {
	t.Parallel()
	_, errs, code := runCmd(t, "query", "--help")
	if code != 0 || !strings.Contains(errs, "  -object int\n    \tobject id (0 or more): print that object, as GET /api/v1/stores/{store}/objects/{id} returns it, instead of a box\n") {
		t.Errorf("exit %d: %s", code, errs)
	}
}

// TestFlagsTakeNegativeValues: a flag's value that starts with '-' (a
// negative coordinate) is the flag's, wherever the flag stands, and a bool
// flag never swallows the STORE after it.
func TestFlagsTakeNegativeValues(t *testing.T) {
	t.Parallel()
	graph := "../../testdata/zvf-reference/graph.zarrvectors"
	want, errs, code := runCmd(t, "query", graph, "--level", "0", "--bbox", "-500,-223,-585,480,313,675")
	if code != 0 || !strings.Contains(want, `"count":`) {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, args := range [][]string{
		{"query", "--bbox", "-500,-223,-585,480,313,675", graph},
		{"query", "--bbox", "-500,-223,-585,480,313,675", graph, "--level", "0"},
		{"query", "--bbox=-500,-223,-585,480,313,675", graph, "--level=0"},
		{"query", "--level", "0", "--bbox", "-500,-223,-585,480,313,675", graph},
		{"query", graph, "--bbox", "-500,-223,-585,480,313,675"},
		{"query", "-bbox", "-500,-223,-585,480,313,675", graph, "-level", "0"},
	} {
		out, errs, code := runCmd(t, args...)
		if code != 0 || out != want {
			t.Errorf("%v: exit %d: %s", args, code, errs)
		}
	}
	out, errs, code := runCmd(t, "validate", "--json", graph, "--level", "2")
	if code != 0 || !strings.Contains(out, `"levels_checked": 2`) {
		t.Errorf("validate --json STORE --level 2: exit %d: %s %s", code, errs, out)
	}
}

// TestQueryEdgeAttributes: query --edge-attributes prints the body GET
// with edge_attributes= returns, and with --all its pages joined keep each
// edge with its value (null ones too): the unpaged answer's members in its
// order, its (edge, value) pairs.
func TestQueryEdgeAttributes(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"../../testdata/zvf-reference/graph.zarrvectors", "../../testdata/zvf-0.9/graph_v09.zarrvectors"} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			ts := httpServer(t, path)
			name, _ := storeArg(path)
			const box = "0,0,0,1000,1000,1000"
			want := apitest.MustGet(t, ts, "/api/v1/stores/"+name+"/bbox?min=0,0,0&max=1000,1000,1000&level=0&edge_attributes=weight&f=json")
			out, errs, code := runCmd(t, "query", path, "--bbox", box, "--edge-attributes", "weight")
			if code != 0 || out != string(want) {
				t.Fatalf("exit %d (%s): %d bytes, GET %d", code, errs, len(out), len(want))
			}
			out, errs, code = runCmd(t, "query", path, "--bbox", box, "--edge-attributes", "weight", "--limit", "97", "--all")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			gm, err := members([]byte(out))
			if err != nil {
				t.Fatal(err)
			}
			wm, _ := members(want)
			if !slices.EqualFunc(gm, wm, func(a, b member) bool { return a.key == b.key }) {
				t.Fatalf("members %v, want those of the unpaged answer", gm)
			}
			pairs := func(doc []byte) []string {
				var d struct {
					Edges          [][2]int64                   `json:"edges"`
					EdgeAttributes map[string][]json.RawMessage `json:"edge_attributes"`
				}
				if err := json.Unmarshal(doc, &d); err != nil {
					t.Fatal(err)
				}
				ws := d.EdgeAttributes["weight"]
				if len(ws) != len(d.Edges) || len(ws) == 0 {
					t.Fatalf("%d weights for %d edges", len(ws), len(d.Edges))
				}
				out := make([]string, len(ws))
				for i, e := range d.Edges {
					out[i] = fmt.Sprint(e, string(ws[i]))
				}
				slices.Sort(out)
				return out
			}
			if g, w := pairs([]byte(out)), pairs(want); !slices.Equal(g, w) {
				t.Fatalf("--all: the edges and their weights differ from the unpaged answer's")
			}
		})
	}
}
