package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
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

// TestWideEdgeValuesArePaged: a chain of 20,000 nodes scattered over 8
// chunks, whose edges carry a 256-channel link attribute (1 KiB an edge;
// the writer keeps none for the cross-chunk ones, most of them). Every
// format holds a page's edges and their values until its end, so a page
// carrying them is bounded by them, like a JSON page's ids and
// attributes: with a 256 KiB page bound, 256 rows a page. Walked page by
// page, JSON and NDJSON give every edge once, each with its own value or
// null. Before, the whole box was one page holding 20 MB of edge values,
// and the zeros of the edges without one passed what zvf fills (16 MiB),
// so the answer failed after it had started: a 200 whose body was cut.
func TestWideEdgeValuesArePaged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	const n, ch, pageBytes = 20000, 256, 256 << 10
	r := rand.New(rand.NewPCG(1, 2))
	g := &writer.Graph{ObjectIDs: make([]int64, n)}
	at := map[string]int{} // a node's position → its index
	vals := make([]float32, 0, (n-1)*ch)
	for i := range n {
		p := [3]float32{float32(r.Float64() * 100), float32(r.Float64() * 100), float32(r.Float64() * 100)}
		g.Positions = append(g.Positions, p[:]...)
		at[fmt.Sprint(p[0], p[1], p[2])] = i
		if i > 0 {
			g.Edges = append(g.Edges, int64(i), int64(i-1))
			for c := range ch {
				vals = append(vals, float32(i-1)+float32(c)/1000) // edge i-1's value
			}
		}
	}
	g.LinkAttributes = []writer.Attribute{writer.Float32Attribute("emb", ch, vals)}
	if _, err := writer.WriteGraph(ctx, mem, "g", g, writer.Options{ChunkShape: []float64{50, 50, 50}}); err != nil {
		t.Fatal(err)
	}
	_, ts := newServer(t, api.Options{JSONPageBytes: pageBytes, Stores: []*zvf.Store{zvftest.OpenSub(t, mem, "g", cache.New(64<<20))}})
	const perPage = pageBytes / (4 * ch)
	for _, f := range []string{"json", "ndjson"} {
		path := "/api/v1/stores/g/bbox?min=-1,-1,-1&max=101,101,101&edge_attributes=emb&f=" + f
		var verts [][]float64
		seen, valued, pages := map[int]bool{}, 0, 0
		for path != "" {
			resp, body := apitest.Get(t, ts, path)
			if resp.StatusCode != 200 {
				t.Fatalf("f=%s page %d: %d %.300s", f, pages, resp.StatusCode, body)
			}
			var tail struct {
				Vertices       [][]float64             `json:"vertices"`
				Edges          [][2]int                `json:"edges"`
				EdgeAttributes map[string][]*[]float64 `json:"edge_attributes"`
				Next           *string                 `json:"next"`
			}
			lines := []string{string(body)}
			if f == "ndjson" {
				lines = strings.Split(strings.TrimSpace(string(body)), "\n")
				for _, ln := range lines[1 : len(lines)-1] {
					var row struct{ V []float64 }
					if err := json.Unmarshal([]byte(ln), &row); err != nil {
						t.Fatalf("f=%s page %d: %v", f, pages, err)
					}
					tail.Vertices = append(tail.Vertices, row.V)
				}
			}
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &tail); err != nil {
				t.Fatalf("f=%s page %d: %v", f, pages, err)
			}
			// A row of a chain ends at most two edges.
			if len(tail.Vertices) > perPage || len(tail.Edges) > 2*perPage {
				t.Fatalf("f=%s page %d: %d rows, %d edges with values; a page holds at most %d rows", f, pages, len(tail.Vertices), len(tail.Edges), perPage)
			}
			verts = append(verts, tail.Vertices...)
			col := tail.EdgeAttributes["emb"]
			if len(col) != len(tail.Edges) {
				t.Fatalf("f=%s page %d: %d values for %d edges", f, pages, len(col), len(tail.Edges))
			}
			for i, e := range tail.Edges {
				a := at[fmt.Sprint(float32(verts[e[0]][0]), float32(verts[e[0]][1]), float32(verts[e[0]][2]))]
				b := at[fmt.Sprint(float32(verts[e[1]][0]), float32(verts[e[1]][1]), float32(verts[e[1]][2]))]
				if a != b+1 || seen[b] {
					t.Fatalf("f=%s page %d: edge %v is nodes %d→%d (seen %v)", f, pages, e, a, b, seen[b])
				}
				seen[b] = true
				if v := col[i]; v != nil {
					valued++
					if len(*v) != ch || float32((*v)[0]) != float32(b) || float32((*v)[ch-1]) != float32(b)+float32(ch-1)/1000 {
						t.Fatalf("f=%s page %d: edge %d→%d has the value of another: %v…", f, pages, a, b, (*v)[:2])
					}
				}
			}
			pages++
			path = ""
			if tail.Next != nil {
				path = "/api/v1/stores/g/bbox?min=-1,-1,-1&max=101,101,101&edge_attributes=emb&f=" + f + "&cursor=" + *tail.Next
			}
		}
		if len(seen) != n-1 || valued == 0 || valued == n-1 || pages < 2 {
			t.Fatalf("f=%s: %d pages, %d of %d edges, %d with values", f, pages, len(seen), n-1, valued)
		}
	}
}
