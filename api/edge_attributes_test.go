package api_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// edgeAnswer is what a JSON bbox answer says of its edges.
type edgeAnswer struct {
	Vertices       [][]float64           `json:"vertices"`
	Edges          [][2]int64            `json:"edges"`
	EdgeAttributes map[string][]*float64 `json:"edge_attributes"`
	Next           *string               `json:"next"`
}

// levelWeights is the reader's weight of each edge of the whole box, by
// its two positions (the zvf tests hold the reader to the files).
func levelWeights(t *testing.T, s *zvf.Store) map[string]*float64 {
	t.Helper()
	l, err := s.Level(0)
	if err != nil {
		t.Fatal(err)
	}
	var verts []string
	res, err := l.BBox(context.Background(), zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Connectivity: true, LinkAttributes: []string{"weight"}},
		func(b *zvf.Batch) error {
			for i := 0; i < b.Rows; i++ {
				verts = append(verts, fmt.Sprint(float32(b.Vertices.At(3*i).F), float32(b.Vertices.At(3*i+1).F), float32(b.Vertices.At(3*i+2).F)))
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*float64{}
	col := res.EdgeAttributes[0]
	for i := 0; i < len(res.Edges)/2; i++ {
		var w *float64
		if col.Valid == nil || col.Valid[i] {
			v := col.At(i).F
			w = &v
		}
		out[verts[res.Edges[2*i]]+"|"+verts[res.Edges[2*i+1]]] = w
	}
	return out
}

// TestEdgeAttributesJSON: a JSON or NDJSON bbox answer with
// edge_attributes carries each edge's weight (null for the 0.7 graph's
// cross-chunk edges, whose writer keeps none), whole and over pages, for
// both reference graphs; without the parameter, and for a store without
// link attributes, the answer's bytes are those it had.
func TestEdgeAttributesJSON(t *testing.T) {
	t.Parallel()
	ch := cache.New(64 << 20)
	g07 := apitest.Open(t, filepath.Join(fixtures, "graph.zarrvectors"), "graph", ch)
	g09 := apitest.Open(t, filepath.Join(fixtures09, "graph_v09.zarrvectors"), "graph_v09", ch)
	mesh := apitest.Open(t, filepath.Join(fixtures, "mesh.zarrvectors"), "mesh", ch)
	_, ts := newServer(t, api.Options{Stores: []*zvf.Store{g07, g09, mesh}})
	for _, tc := range []struct {
		store          *zvf.Store
		weighted, null int
	}{{g07, 456, 200}, {g09, 516, 0}} {
		want := levelWeights(t, tc.store)
		for _, f := range []string{"json", "ndjson"} {
			for _, limit := range []string{"", "&limit=97"} {
				t.Run(tc.store.Name()+" "+f+limit, func(t *testing.T) {
					path := "/api/v1/stores/" + tc.store.Name() + "/bbox?min=0,0,0&max=1000,1000,1000&edge_attributes=weight&f=" + f + limit
					var verts []string
					weighted, null := 0, 0
					for page := 0; path != ""; page++ {
						resp, body := apitest.Get(t, ts, path)
						if resp.StatusCode != 200 {
							t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
						}
						a := readEdgeAnswer(t, f, body)
						for _, p := range a.Vertices {
							verts = append(verts, fmt.Sprint(float32(p[0]), float32(p[1]), float32(p[2])))
						}
						ws := a.EdgeAttributes["weight"]
						if len(a.EdgeAttributes) != 1 || len(ws) != len(a.Edges) {
							t.Fatalf("page %d: edge_attributes %v for %d edges", page, a.EdgeAttributes, len(a.Edges))
						}
						for i, e := range a.Edges {
							k := verts[e[0]] + "|" + verts[e[1]]
							w, ok := want[k]
							switch {
							case !ok:
								t.Fatalf("page %d: edge %s is not one of the level's", page, k)
							case (w == nil) != (ws[i] == nil) || (w != nil && float32(*w) != float32(*ws[i])):
								t.Fatalf("page %d edge %d (%s): weight %v, the reader's %v", page, i, k, ws[i], w)
							case w == nil:
								null++
							default:
								weighted++
							}
						}
						path = ""
						if a.Next != nil {
							path = "/api/v1/stores/" + tc.store.Name() + "/bbox?min=0,0,0&max=1000,1000,1000&edge_attributes=weight&f=" + f + limit + "&cursor=" + *a.Next
						}
					}
					if weighted != tc.weighted || null != tc.null {
						t.Fatalf("%d weighted edges and %d without; want %d and %d", weighted, null, tc.weighted, tc.null)
					}
				})
			}
		}
	}
	t.Run("objects", func(t *testing.T) {
		for _, tc := range []struct {
			store          *zvf.Store
			weighted, null int
		}{{g07, 456, 200}, {g09, 516, 0}} {
			want := levelWeights(t, tc.store)
			weighted, null := 0, 0
			for id := range 4 {
				for _, f := range []string{"json", "ndjson"} {
					body := apitest.MustGet(t, ts, fmt.Sprintf("/api/v1/stores/%s/objects/%d?edge_attributes=*&f=%s", tc.store.Name(), id, f))
					a := readEdgeAnswer(t, f, body)
					ws := a.EdgeAttributes["weight"]
					if len(ws) != len(a.Edges) || len(a.Edges) == 0 {
						t.Fatalf("%s object %d f=%s: %d weights for %d edges", tc.store.Name(), id, f, len(ws), len(a.Edges))
					}
					for i, e := range a.Edges {
						p, q := a.Vertices[e[0]], a.Vertices[e[1]]
						pa, pb := fmt.Sprint(float32(p[0]), float32(p[1]), float32(p[2])), fmt.Sprint(float32(q[0]), float32(q[1]), float32(q[2]))
						w, ok := want[pa+"|"+pb]
						if !ok {
							w, ok = want[pb+"|"+pa]
						}
						if !ok || (w == nil) != (ws[i] == nil) || (w != nil && float32(*w) != float32(*ws[i])) {
							t.Fatalf("%s object %d edge %d: %v, the reader's box %v (%v)", tc.store.Name(), id, i, ws[i], w, ok)
						}
						if f == "json" && w == nil {
							null++
						} else if f == "json" {
							weighted++
						}
					}
				}
			}
			if weighted != tc.weighted || null != tc.null {
				t.Fatalf("%s objects: %d weighted edges, %d without; want %d, %d", tc.store.Name(), weighted, null, tc.weighted, tc.null)
			}
		}
	})
	t.Run("unchanged", func(t *testing.T) {
		// Answers that do not ask, and a store without link attributes
		// asked for all, are byte for byte what they were.
		for _, f := range []string{"json", "ndjson"} {
			plain := apitest.MustGet(t, ts, "/api/v1/stores/graph/bbox?min=0,0,0&max=1000,1000,1000&f="+f)
			if strings.Contains(string(plain), "edge_attributes") {
				t.Fatalf("f=%s: edge_attributes in an answer that did not ask", f)
			}
			m0 := apitest.MustGet(t, ts, "/api/v1/stores/mesh/bbox?min=0,0,0&max=1000,1000,1000&f="+f)
			m1 := apitest.MustGet(t, ts, "/api/v1/stores/mesh/bbox?min=0,0,0&max=1000,1000,1000&edge_attributes=*&f="+f)
			if string(m0) != string(m1) {
				t.Fatalf("f=%s: edge_attributes=* changed the answer of a store without link attributes", f)
			}
		}
	})
}

// TestEdgeAttributesRefused: where edge_attributes cannot be answered the
// client is told why (the format, no connectivity, no such attribute), and
// a mis-sized link attribute cell is a 422 naming the array and the cell.
func TestEdgeAttributesRefused(t *testing.T) {
	t.Parallel()
	dir := zvftest.CopyTree(t, filepath.Join(fixtures09, "graph_v09.zarrvectors"))
	p := filepath.Join(dir, "0/link_attributes/weight/0/0.0.0/c/1/4/6")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	payload := b[8 : len(b)-4]
	frame := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 1), uint32(len(payload)))
	if err := os.WriteFile(p, append(frame, payload...), 0o644); err != nil {
		t.Fatal(err)
	}
	ch := cache.New(16 << 20)
	_, ts := newServer(t, api.Options{Stores: []*zvf.Store{
		apitest.Open(t, filepath.Join(fixtures, "graph.zarrvectors"), "graph", ch),
		apitest.Open(t, dir, "broken", ch)}})
	const box = "bbox?min=0,0,0&max=1000,1000,1000"
	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{"/api/v1/stores/graph/" + box + "&edge_attributes=weight&f=swc", 400, "f=swc has no place for edge values; f=json, f=ndjson, f=bin, f=arrow\\u0026table=edges and f=ply (streamlines, skeletons, graphs) carry them"},
		{"/api/v1/stores/graph/" + box + "&edge_attributes=weight&f=geoarrow", 400, "f=geoarrow has a row per object, not per edge; f=json, f=ndjson, f=bin, f=arrow\\u0026table=edges and f=ply (streamlines, skeletons, graphs) carry them"},
		{"/api/v1/stores/graph/objects/1?edge_attributes=weight&f=swc", 400, "f=swc has no place for edge values"},
		{"/api/v1/stores/graph/" + box + "&edge_attributes=weight&f=arrow", 400, "table=edges"},
		{"/api/v1/stores/graph/" + box + "&edge_attributes=weight&connectivity=false", 400, "give no connectivity=false"},
		{"/api/v1/stores/graph/" + box + "&edge_attributes=weight,weight", 400, `\"weight\" is named twice in edge_attributes`},
		{"/api/v1/stores/graph/" + box + "&edge_attributes=synapses", 404, `no link attribute \"synapses\"`},
		// level=auto names what no level holds, and only that (it once
		// said "every attribute of \"\"" when no vertex attribute was asked).
		{"/api/v1/stores/graph/" + box + "&level=auto&edge_attributes=synapses", 404, `no level holds link attribute \"synapses\"`},
		{"/api/v1/stores/graph/" + box + "&level=auto&attributes=mass", 404, `no level holds vertex attribute \"mass\"`},
		{"/api/v1/stores/graph/" + box + "&level=auto&attributes=radius&edge_attributes=synapses", 404, `no level holds vertex attribute \"radius\" and link attribute \"synapses\" together`},
		{"/api/v1/stores/broken/" + box + "&edge_attributes=weight", 422, "link_attributes/weight/0/0.0.0"},
	} {
		resp, body := apitest.Get(t, ts, c.path)
		if resp.StatusCode != c.code || !strings.Contains(string(body), c.want) {
			t.Errorf("%s: %d %s; want %d and %q", c.path, resp.StatusCode, body, c.code, c.want)
		}
		if strings.Contains(string(body), `\"\"`) {
			t.Errorf("%s: the problem names an empty list: %s", c.path, body)
		}
		if c.code == 422 && !strings.Contains(string(body), "1.4.6") {
			t.Errorf("%s: the problem does not name the cell: %s", c.path, body)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("%s: %s", c.path, ct)
		}
	}
}

// TestEdgeAttributesBinary: f=bin with edge_attributes names them in the
// header's edge_attribute_info and follows the edges block with a block
// of kind 7 each: a validity bitmap padded to 8 bytes, then a value an
// edge, the JSON answer's values (null: bit clear, value 0). Without
// edge_attributes, and for a store without link attributes asked for
// all, the answer is byte for byte what it was.
func TestEdgeAttributesBinary(t *testing.T) {
	t.Parallel()
	ch := cache.New(64 << 20)
	_, ts := newServer(t, api.Options{Stores: []*zvf.Store{
		apitest.Open(t, filepath.Join(fixtures, "graph.zarrvectors"), "graph", ch),
		apitest.Open(t, filepath.Join(fixtures09, "graph_v09.zarrvectors"), "graph_v09", ch),
		apitest.Open(t, filepath.Join(fixtures, "mesh.zarrvectors"), "mesh", ch)}})
	const box = "/bbox?min=0,0,0&max=1000,1000,1000"
	for _, st := range []string{"graph", "graph_v09"} {
		for _, limit := range []string{"", "&limit=97"} {
			jpath := "/api/v1/stores/" + st + box + "&edge_attributes=*" + limit
			bpath := jpath + "&f=bin"
			nulls := 0
			for page := 0; ; page++ {
				var j struct {
					Edges          [][2]int64            `json:"edges"`
					EdgeAttributes map[string][]*float64 `json:"edge_attributes"`
					Info           []map[string]any      `json:"edge_attribute_info"`
					Next           *string               `json:"next"`
				}
				if err := json.Unmarshal(apitest.MustGet(t, ts, jpath), &j); err != nil {
					t.Fatal(err)
				}
				header, blocks := binBlocks(t, apitest.MustGet(t, ts, bpath))
				if !strings.Contains(string(header), `"edge_attribute_info":[{"name":"weight","dtype":"float32","channels":1}]`) {
					t.Fatalf("%s: header %s", bpath, header)
				}
				var edges, vals []byte
				for i, b := range blocks {
					if b.kind == 7 {
						if b.aux != 0 || i == 0 || blocks[i-1].kind != 4 {
							t.Fatalf("%s: an edge attribute block of aux %d after a block of kind %d", bpath, b.aux, blocks[i-1].kind)
						}
						vals = b.payload
					}
					if b.kind == 4 {
						edges = b.payload
					}
				}
				ne := len(j.Edges)
				bits := (ne + 63) / 64 * 8
				if len(edges) != 8*ne || len(vals) != bits+4*ne {
					t.Fatalf("%s: edges block of %d bytes, edge attribute block of %d, for %d edges", bpath, len(edges), len(vals), ne)
				}
				ws := j.EdgeAttributes["weight"]
				for i := range ne {
					if a, b := binary.LittleEndian.Uint32(edges[8*i:]), binary.LittleEndian.Uint32(edges[8*i+4:]); int64(a) != j.Edges[i][0] || int64(b) != j.Edges[i][1] {
						t.Fatalf("%s edge %d: %d-%d, JSON %v", bpath, i, a, b, j.Edges[i])
					}
					valid := vals[i>>3]&(1<<(i&7)) != 0
					v := math.Float32frombits(binary.LittleEndian.Uint32(vals[bits+4*i:]))
					switch {
					case valid != (ws[i] != nil):
						t.Fatalf("%s edge %d: valid %v, JSON %v", bpath, i, valid, ws[i])
					case !valid && v != 0:
						t.Fatalf("%s edge %d: no value, yet %v", bpath, i, v)
					case valid && v != float32(*ws[i]):
						t.Fatalf("%s edge %d: %v, JSON %v", bpath, i, v, *ws[i])
					case !valid:
						nulls++
					}
				}
				if j.Next == nil {
					break
				}
				jpath = "/api/v1/stores/" + st + box + "&edge_attributes=*" + limit + "&cursor=" + *j.Next
				bpath = jpath + "&f=bin"
			}
			if want := map[string]int{"graph": 200, "graph_v09": 0}[st]; nulls != want {
				t.Fatalf("%s%s: %d edges without a value, want %d", st, limit, nulls, want)
			}
		}
	}
	plain := apitest.MustGet(t, ts, "/api/v1/stores/graph"+box+"&f=bin")
	if _, blocks := binBlocks(t, plain); slices.ContainsFunc(blocks, func(b binBlock) bool { return b.kind == 7 }) || strings.Contains(string(plain), "edge_attribute_info") {
		t.Fatal("an answer that did not ask has edge attributes")
	}
	m0 := apitest.MustGet(t, ts, "/api/v1/stores/mesh"+box+"&f=bin")
	m1 := apitest.MustGet(t, ts, "/api/v1/stores/mesh"+box+"&f=bin&edge_attributes=*")
	if string(m0) != string(m1) {
		t.Fatal("edge_attributes=* changed the binary answer of a store without link attributes")
	}
}

// readEdgeAnswer reads a JSON answer, or an NDJSON one (its rows' vertices
// and its last line's members), into an edgeAnswer.
func readEdgeAnswer(t *testing.T, f string, body []byte) edgeAnswer {
	t.Helper()
	var a edgeAnswer
	if f == "json" {
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	for _, ln := range lines[1 : len(lines)-1] {
		var row struct {
			V []float64 `json:"v"`
		}
		if err := json.Unmarshal([]byte(ln), &row); err != nil {
			t.Fatal(err)
		}
		a.Vertices = append(a.Vertices, row.V)
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &a); err != nil {
		t.Fatal(err)
	}
	return a
}
