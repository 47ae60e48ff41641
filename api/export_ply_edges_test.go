package api_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// plySizes are the bytes of PLY's scalar types.
var plySizes = map[string]int{"char": 1, "uchar": 1, "short": 2, "ushort": 2, "int": 4, "uint": 4, "float": 4, "double": 8}

// plyElements reads a binary PLY header's elements: name, count and
// property lines, in order.
type plyElement struct {
	name  string
	count int
	props []string // "type name"
}

func plyElements(t *testing.T, lines []string) []plyElement {
	t.Helper()
	var out []plyElement
	for _, ln := range lines {
		f := strings.Fields(ln)
		switch {
		case len(f) == 3 && f[0] == "element":
			n, err := strconv.Atoi(f[2])
			if err != nil {
				t.Fatalf("header line %q", ln)
			}
			out = append(out, plyElement{name: f[1], count: n})
		case len(f) >= 3 && f[0] == "property" && len(out) > 0:
			out[len(out)-1].props = append(out[len(out)-1].props, strings.Join(f[1:], " "))
		}
	}
	return out
}

// rowBytes is a row's size of an element of scalar properties.
func (e plyElement) rowBytes(t *testing.T) int {
	n := 0
	for _, p := range e.props {
		s, ok := plySizes[strings.Fields(p)[0]]
		if !ok {
			t.Fatalf("element %s: property %q is not a scalar", e.name, p)
		}
		n += s
	}
	return n
}

// TestPLYEdgeAttributes: a graph's PLY (bbox and object) is its vertices
// then an edge element, vertex1 and vertex2 the JSON answer's edges in
// order; edge_attributes=weight adds a float property, each edge's JSON
// value (NaN where JSON has null: the 0.7 graph's cross-chunk edges).
func TestPLYEdgeAttributes(t *testing.T) {
	t.Parallel()
	ch := cache.New(64 << 20)
	_, ts := newServer(t, api.Options{Stores: []*zvf.Store{
		apitest.Open(t, filepath.Join(fixtures, "graph.zarrvectors"), "graph", ch),
		apitest.Open(t, filepath.Join(fixtures09, "graph_v09.zarrvectors"), "graph_v09", ch)}})
	for _, c := range []struct {
		path  string
		nulls int
	}{
		{"/api/v1/stores/graph/bbox?min=0,0,0&max=1000,1000,1000", 200},
		{"/api/v1/stores/graph_v09/bbox?min=0,0,0&max=1000,1000,1000", 0},
		{"/api/v1/stores/graph/objects/1", -1},
	} {
		sep := "?"
		if strings.Contains(c.path, "?") {
			sep = "&"
		}
		var j struct {
			Count          int                   `json:"count"`
			Edges          [][2]int64            `json:"edges"`
			EdgeAttributes map[string][]*float64 `json:"edge_attributes"`
		}
		if err := json.Unmarshal(apitest.MustGet(t, ts, c.path+sep+"edge_attributes=weight"), &j); err != nil {
			t.Fatal(err)
		}
		for _, asked := range []bool{false, true} {
			path := c.path + sep + "f=ply"
			if asked {
				path += "&edge_attributes=weight"
			}
			resp, b := apitest.Get(t, ts, path)
			if resp.StatusCode != 200 {
				t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
			}
			lines, body := plyHeader(t, b)
			els := plyElements(t, lines)
			wantProps := []string{"int vertex1", "int vertex2"}
			if asked {
				wantProps = append(wantProps, "float weight")
			}
			if len(els) != 2 || els[0].name != "vertex" || els[0].count != j.Count || els[1].name != "edge" || els[1].count != len(j.Edges) ||
				!slices.Equal(els[1].props, wantProps) || len(j.Edges) == 0 {
				t.Fatalf("%s: elements %+v; JSON %d vertices, %d edges", path, els, j.Count, len(j.Edges))
			}
			eb := body[els[0].count*els[0].rowBytes(t):]
			row := els[1].rowBytes(t)
			if len(eb) != row*len(j.Edges) {
				t.Fatalf("%s: %d bytes of edges, want %d", path, len(eb), row*len(j.Edges))
			}
			nulls := 0
			for i, e := range j.Edges {
				r := eb[i*row:]
				if a, b := int32(binary.LittleEndian.Uint32(r)), int32(binary.LittleEndian.Uint32(r[4:])); int64(a) != e[0] || int64(b) != e[1] {
					t.Fatalf("%s edge %d: %d-%d, JSON %v", path, i, a, b, e)
				}
				if !asked {
					continue
				}
				v, w := math.Float32frombits(binary.LittleEndian.Uint32(r[8:])), j.EdgeAttributes["weight"][i]
				switch {
				case w == nil && !math.IsNaN(float64(v)):
					t.Fatalf("%s edge %d: %v where JSON has null", path, i, v)
				case w == nil:
					nulls++
				case v != float32(*w):
					t.Fatalf("%s edge %d: %v, JSON %v", path, i, v, *w)
				}
			}
			if asked && c.nulls >= 0 && nulls != c.nulls {
				t.Fatalf("%s: %d edges without a weight, want %d", path, nulls, c.nulls)
			}
		}
	}
}

// TestPLYEdgeAttributeTypes: an integer link attribute with an edge
// without a value (a cross-chunk edge of this ZVF 0.7 graph) is double,
// NaN there; a categorical one is its codes with its labels in a
// comment; one named
// vertex1 would be a second property of that name: a 422 saying so. A
// mesh's PLY has no edges, and refuses edge_attributes.
func TestPLYEdgeAttributeTypes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	// Chunks of 5: vertices 0 and 1 share one, 2 is alone (edge 2→1
	// crosses chunks).
	g := &writer.Graph{Positions: []float32{1, 1, 1, 2, 2, 2, 8, 8, 8}, Edges: []int64{1, 0, 2, 1}}
	g.LinkAttributes = []writer.Attribute{writer.Int32Attribute("n", 1, []int32{7, 9}), writer.Float32Attribute("vertex1", 1, []float32{0.5, 1.5}),
		writer.Uint8Attribute("kind", 1, []uint8{1, 0})}
	if _, err := writer.WriteGraph(ctx, mem, "g", g, writer.Options{ChunkShape: []float64{5, 5, 5}}); err != nil {
		t.Fatal(err)
	}
	ch := cache.New(1 << 20)
	_, ts := newServer(t, api.Options{Stores: []*zvf.Store{zvftest.OpenSub(t, mem, "g", ch),
		apitest.Open(t, filepath.Join(fixtures, "mesh.zarrvectors"), "mesh", ch)}})
	const box = "/api/v1/stores/g/bbox?min=0,0,0&max=9,9,9&f=ply&edge_attributes="
	resp, body := apitest.Get(t, ts, box+"n,kind")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var j struct {
		Edges          [][2]int64                   `json:"edges"`
		EdgeAttributes map[string][]json.RawMessage `json:"edge_attributes"`
	}
	if err := json.Unmarshal(apitest.MustGet(t, ts, "/api/v1/stores/g/bbox?min=0,0,0&max=9,9,9&edge_attributes=n,kind"), &j); err != nil {
		t.Fatal(err)
	}
	lines, b := plyHeader(t, body)
	els := plyElements(t, lines)
	if len(els) != 2 || !slices.Equal(els[1].props, []string{"int vertex1", "int vertex2", "double n", "double kind"}) {
		t.Fatalf("header %q", lines)
	}
	eb := b[els[0].count*els[0].rowBytes(t):]
	if len(j.Edges) != 2 || len(eb) != 2*24 {
		t.Fatalf("JSON edges %v, %d bytes of PLY edges", j.Edges, len(eb))
	}
	nulls := 0
	for i := range j.Edges {
		n, kind := math.Float64frombits(binary.LittleEndian.Uint64(eb[24*i+8:])), math.Float64frombits(binary.LittleEndian.Uint64(eb[24*i+16:]))
		switch jn, jk := string(j.EdgeAttributes["n"][i]), string(j.EdgeAttributes["kind"][i]); {
		case jn == "null" && math.IsNaN(n) && jk == "null" && math.IsNaN(kind):
			nulls++
		case jn != strconv.FormatFloat(n, 'g', -1, 64) || jk != strconv.FormatFloat(kind, 'g', -1, 64):
			t.Fatalf("edge %d: n %v kind %v, JSON %s %s", i, n, kind, jn, jk)
		}
	}
	if nulls != 1 {
		t.Fatalf("%d edges without values, want the cross-chunk one", nulls)
	}
	cat, _ := chainWithLinkAttrs(t, func(a string) string {
		return strings.Replace(a, `"dtype": "int32"`, `"dtype": "int32", "encoding": "dictionary", "categories": ["axon", "dendrite"]`, 1)
	})
	_, cts := newServer(t, api.Options{Stores: []*zvf.Store{cat}})
	if lines, _ := plyHeader(t, apitest.MustGet(t, cts, "/api/v1/stores/h/bbox?min=0,0,0&max=40,40,40&edge_attributes=kind&f=ply")); !slices.Contains(lines, `comment edge categories kind ["axon","dendrite"]`) {
		t.Errorf("categorical: header %q", lines)
	}
	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{box + "vertex1", 422, `f=ply would have two columns named \"vertex1\"`},
		{"/api/v1/stores/mesh/bbox?min=0,0,0&max=1000,1000,1000&f=ply&edge_attributes=*", 400, "f=ply of a mesh store has no edges"},
	} {
		resp, body := apitest.Get(t, ts, c.path)
		if resp.StatusCode != c.code || !strings.Contains(string(body), c.want) {
			t.Errorf("%s: %d %s; want %d and %q", c.path, resp.StatusCode, body, c.code, c.want)
		}
	}
}
