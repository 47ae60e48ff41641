package api_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
)

// chunkEdges is what a JSON chunk answer says of its links.
type chunkEdges struct {
	Vertices       [][]float64           `json:"vertices"`
	Links          [][]int64             `json:"links"`
	EdgeAttributes map[string][]*float64 `json:"edge_attributes"`
	Info           []map[string]any      `json:"edge_attribute_info"`
}

// TestEdgeAttributesChunk: the chunk route's edge_attributes gives a
// value per row of its links, the reader's weight of that edge (every
// intra-chunk link has one, in both reference graphs), in JSON and
// NDJSON; f=bin follows an edges block of the links with a block of kind
// 7, as bbox does.
func TestEdgeAttributesChunk(t *testing.T) {
	t.Parallel()
	ch := cache.New(64 << 20)
	g07 := apitest.Open(t, filepath.Join(fixtures, "graph.zarrvectors"), "graph", ch)
	g09 := apitest.Open(t, filepath.Join(fixtures09, "graph_v09.zarrvectors"), "graph_v09", ch)
	_, ts := newServer(t, api.Options{Stores: []*zvf.Store{g07, g09}})
	for _, st := range []*zvf.Store{g07, g09} {
		want := levelWeights(t, st)
		var list struct {
			Chunks []string `json:"chunks"`
		}
		if err := json.Unmarshal(apitest.MustGet(t, ts, "/api/v1/stores/"+st.Name()+"/levels/0/chunks"), &list); err != nil {
			t.Fatal(err)
		}
		weighted := 0
		for _, key := range list.Chunks {
			path := "/api/v1/stores/" + st.Name() + "/levels/0/chunks/" + key + "?edge_attributes=weight"
			var j chunkEdges
			resp, body := apitest.Get(t, ts, path)
			if resp.StatusCode != 200 {
				t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
			}
			if err := json.Unmarshal(body, &j); err != nil {
				t.Fatal(err)
			}
			ws, ok := j.EdgeAttributes["weight"]
			if !ok || len(ws) != len(j.Links) || len(j.Info) != 1 || j.Info[0]["name"] != "weight" {
				t.Fatalf("%s: edge_attributes %v, info %v, for %d links", path, j.EdgeAttributes, j.Info, len(j.Links))
			}
			pos := func(i int64) string {
				p := j.Vertices[i]
				return fmt.Sprint(float32(p[0]), float32(p[1]), float32(p[2]))
			}
			for i, e := range j.Links {
				w, ok := want[pos(e[0])+"|"+pos(e[1])]
				if !ok {
					w, ok = want[pos(e[1])+"|"+pos(e[0])]
				}
				if !ok || w == nil || ws[i] == nil || float32(*w) != float32(*ws[i]) {
					t.Fatalf("%s link %d %v: weight %v, the reader's %v (%v)", path, i, e, ws[i], w, ok)
				}
				weighted++
			}
			nd := readEdgeAnswer(t, "ndjson", apitest.MustGet(t, ts, path+"&f=ndjson"))
			if got, _ := json.Marshal(nd.EdgeAttributes); string(got) != mustJSON(t, j.EdgeAttributes) {
				t.Fatalf("%s f=ndjson: %s, JSON %s", path, got, mustJSON(t, j.EdgeAttributes))
			}
			header, blocks := binBlocks(t, apitest.MustGet(t, ts, path+"&f=bin"))
			if !strings.Contains(string(header), `"edge_attribute_info":[{"name":"weight","dtype":"float32","channels":1}]`) {
				t.Fatalf("%s f=bin: header %s", path, header)
			}
			var edges, vals []byte
			for i, b := range blocks {
				switch b.kind {
				case 4:
					edges = b.payload
				case 7:
					if i == 0 || blocks[i-1].kind != 4 {
						t.Fatalf("%s f=bin: an edge attribute block not after the edges block", path)
					}
					vals = b.payload
				}
			}
			ne := len(j.Links)
			bits := (ne + 63) / 64 * 8
			if len(edges) != 8*ne || len(vals) != bits+4*ne {
				t.Fatalf("%s f=bin: edges block of %d bytes, edge attribute block of %d, for %d links", path, len(edges), len(vals), ne)
			}
			for i, e := range j.Links {
				a, b := binary.LittleEndian.Uint32(edges[8*i:]), binary.LittleEndian.Uint32(edges[8*i+4:])
				v := math.Float32frombits(binary.LittleEndian.Uint32(vals[bits+4*i:]))
				if int64(a) != e[0] || int64(b) != e[1] || vals[i>>3]&(1<<(i&7)) == 0 || v != float32(*ws[i]) {
					t.Fatalf("%s f=bin link %d: %d-%d %v, JSON %v %v", path, i, a, b, v, e, *ws[i])
				}
			}
		}
		if weighted == 0 {
			t.Fatalf("%s: no chunk has a weighted link", st.Name())
		}
	}
}

// TestEdgeAttributesChunkRefused: the chunk route refuses edge_attributes
// as bbox does, saying why; a chunk answer that does not ask is as it was.
func TestEdgeAttributesChunkRefused(t *testing.T) {
	t.Parallel()
	ch := cache.New(16 << 20)
	_, ts := newServer(t, api.Options{Stores: []*zvf.Store{
		apitest.Open(t, filepath.Join(fixtures, "graph.zarrvectors"), "graph", ch),
		apitest.Open(t, filepath.Join(fixtures, "mesh.zarrvectors"), "mesh", ch)}})
	const chunk = "/api/v1/stores/graph/levels/0/chunks/3.4.2"
	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{chunk + "?edge_attributes=weight&f=arrow", 400, "table=edges"},
		{chunk + "?edge_attributes=weight,weight", 400, `\"weight\" is named twice in edge_attributes`},
		{chunk + "?edge_attributes=synapses", 404, `no link attribute \"synapses\"`},
		{chunk + "?table=faces&f=arrow", 400, `table=\"faces\": use vertices or edges`},
		{"/api/v1/stores/mesh/levels/0/chunks/0.0.0?table=edges&f=arrow", 400, "a mesh store has no edges"},
	} {
		resp, body := apitest.Get(t, ts, c.path)
		if resp.StatusCode != c.code || !strings.Contains(string(body), c.want) {
			t.Errorf("%s: %d %s; want %d and %q", c.path, resp.StatusCode, body, c.code, c.want)
		}
	}
	for _, f := range []string{"json", "ndjson", "bin"} {
		plain := apitest.MustGet(t, ts, chunk+"?f="+f)
		if strings.Contains(string(plain), "edge_attribute") {
			t.Errorf("f=%s: a chunk answer that did not ask has edge attributes", f)
		}
		if _, blocks := binBlocksIf(t, f, plain); blocks > 0 {
			t.Errorf("f=%s: a chunk answer that did not ask has %d edges or edge attribute blocks", f, blocks)
		}
	}
}

// binBlocksIf counts the edges and edge attribute blocks of a binary
// answer (none for the other formats).
func binBlocksIf(t *testing.T, f string, body []byte) ([]byte, int) {
	t.Helper()
	if f != "bin" {
		return nil, 0
	}
	header, blocks := binBlocks(t, body)
	n := 0
	for _, b := range blocks {
		if b.kind == 4 || b.kind == 7 {
			n++
		}
	}
	return header, n
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
