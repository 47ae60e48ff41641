package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
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
	w := newWideChain(t)
	for _, f := range []string{"json", "ndjson"} {
		pages, seen, valued := w.walk(t, "/api/v1/stores/g/bbox?min=-1,-1,-1&max=101,101,101&edge_attributes=emb&f="+f, f)
		if seen != wideN-1 || valued == 0 || valued == wideN-1 || pages < 2 {
			t.Fatalf("f=%s: %d pages, %d of %d edges, %d with values", f, pages, seen, wideN-1, valued)
		}
	}
}

// TestWideEdgeValuesOfAnObject: the same chain is one object, whose
// answer on /objects/{id} holds every edge's values at once (the route
// does not page), most of them without a stored value: past what zvf
// fills with zeros. It was a 422 "unsupported" saying only "edges without
// stored values … bytes of nothing", leaving the user no way to the
// values. The refusal now says the answer is too large for the route and
// gives the bbox request (the object's box, its level, a filter on its
// id, the same edge_attributes and format) whose pages hold the same
// edges and values; followed page by page it gives every edge once, each
// with its own value or null.
func TestWideEdgeValuesOfAnObject(t *testing.T) {
	t.Parallel()
	w := newWideChain(t)
	for _, f := range []string{"json", "ndjson"} {
		resp, body := apitest.Get(t, w.ts, "/api/v1/stores/g/objects/0?edge_attributes=emb&f="+f)
		var p struct {
			Type   string `json:"type"`
			Status int    `json:"status"`
			Detail string `json:"detail"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatalf("f=%s: %d %.300s", f, resp.StatusCode, body)
		}
		if resp.StatusCode != 413 || !strings.HasSuffix(p.Type, "/too-large") {
			t.Fatalf("f=%s: %d %s, want 413 too-large: %s", f, resp.StatusCode, p.Type, p.Detail)
		}
		for _, want := range []string{"object 0", `link attribute "emb"`, "256 × float32", "does not page"} {
			if !strings.Contains(p.Detail, want) {
				t.Errorf("f=%s: detail %q does not say %q", f, p.Detail, want)
			}
		}
		i := strings.Index(p.Detail, "/api/v1/stores/g/bbox?")
		if i < 0 {
			t.Fatalf("f=%s: detail %q names no bbox request", f, p.Detail)
		}
		path, _, _ := strings.Cut(p.Detail[i:], " ")
		for _, want := range []string{"level=0", "edge_attributes=emb", "f=" + f, "filter=object_id"} {
			if !strings.Contains(path, want) {
				t.Errorf("f=%s: %s lacks %s", f, path, want)
			}
		}
		pages, seen, valued := w.walk(t, path, f)
		if seen != wideN-1 || valued == 0 || valued == wideN-1 || pages < 2 {
			t.Fatalf("f=%s: %d pages, %d of %d edges, %d with values", f, pages, seen, wideN-1, valued)
		}
	}
}

// TestDenseWideEdgeValuesPagedByLimit: a page with edge values is
// bounded by them at one edge a row (8 MiB: 8,192 rows at 256 float32
// channels), but a denser graph's page holds more edges. Here each node
// links to the three before it, scattered over 8 chunks, so most edges
// cross chunks and have no stored value: the first page's 24,000 edges
// have about 21,000 without one, past the 16 MiB of zeros zvf fills, and
// the box was a 422 "unsupported … bytes of nothing" with no way on. It
// is now a 413 too-large whose detail gives the limit to ask it with;
// with it the first page is answered, each edge with its own value or
// null, and says where the next starts.
func TestDenseWideEdgeValuesPagedByLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	const n, deg = 9000, 3
	r := rand.New(rand.NewPCG(3, 4))
	g := &writer.Graph{ObjectIDs: make([]int64, n)}
	at := map[string]int{} // a node's position → its index
	var vals []float32
	edge := map[[2]int]int{} // nodes (later, earlier) → the edge's index
	for i := range n {
		p := [3]float32{float32(r.Float64() * 100), float32(r.Float64() * 100), float32(r.Float64() * 100)}
		g.Positions = append(g.Positions, p[:]...)
		at[fmt.Sprint(p[0], p[1], p[2])] = i
		for k := 1; k <= deg && k <= i; k++ {
			edge[[2]int{i, i - k}] = len(g.Edges) / 2
			g.Edges = append(g.Edges, int64(i), int64(i-k))
			for c := range wideCh {
				vals = append(vals, float32(len(g.Edges)/2-1)+float32(c)/1000)
			}
		}
	}
	g.LinkAttributes = []writer.Attribute{writer.Float32Attribute("emb", wideCh, vals)}
	if _, err := writer.WriteGraph(ctx, mem, "g", g, writer.Options{ChunkShape: []float64{50, 50, 50}}); err != nil {
		t.Fatal(err)
	}
	_, ts := newServer(t, api.Options{Stores: []*zvf.Store{zvftest.OpenSub(t, mem, "g", cache.New(128<<20))}})
	path := "/api/v1/stores/g/bbox?min=-1,-1,-1&max=101,101,101&edge_attributes=emb&f=json"
	resp, body := apitest.Get(t, ts, path)
	var p struct {
		Type   string `json:"type"`
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("%d %.300s", resp.StatusCode, body)
	}
	if resp.StatusCode != 413 || !strings.HasSuffix(p.Type, "/too-large") {
		t.Fatalf("%d %s, want 413 too-large: %s", resp.StatusCode, p.Type, p.Detail)
	}
	for _, want := range []string{`link attribute "emb"`, "256 × float32", "from its first page"} {
		if !strings.Contains(p.Detail, want) {
			t.Errorf("detail %q does not say %q", p.Detail, want)
		}
	}
	_, after, _ := strings.Cut(p.Detail, "limit=")
	limit := after[:len(after)-len(strings.TrimLeft(after, "0123456789"))]
	if limit == "" {
		t.Fatalf("detail %q names no limit", p.Detail)
	}
	resp, body = apitest.Get(t, ts, path+"&limit="+limit)
	var page struct {
		Vertices       [][]float64             `json:"vertices"`
		Edges          [][2]int                `json:"edges"`
		EdgeAttributes map[string][]*[]float64 `json:"edge_attributes"`
		Next           *string                 `json:"next"`
	}
	if resp.StatusCode != 200 {
		t.Fatalf("limit=%s: %d %.300s", limit, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatalf("limit=%s: %v", limit, err)
	}
	col := page.EdgeAttributes["emb"]
	if page.Next == nil || len(page.Edges) < len(page.Vertices) || len(col) != len(page.Edges) {
		t.Fatalf("limit=%s: %d rows, %d edges, %d values, next %v", limit, len(page.Vertices), len(page.Edges), len(col), page.Next != nil)
	}
	node := func(v []float64) int { return at[fmt.Sprint(float32(v[0]), float32(v[1]), float32(v[2]))] }
	valued := 0
	for i, e := range page.Edges {
		a, b := node(page.Vertices[e[0]]), node(page.Vertices[e[1]])
		k, ok := edge[[2]int{max(a, b), min(a, b)}]
		if !ok {
			t.Fatalf("edge %v is nodes %d, %d: no such edge", e, a, b)
		}
		if v := col[i]; v != nil {
			valued++
			if len(*v) != wideCh || float32((*v)[0]) != float32(k) || float32((*v)[wideCh-1]) != float32(k)+float32(wideCh-1)/1000 {
				t.Fatalf("edge %d (%d, %d) has the value of another: %v…", k, a, b, (*v)[:2])
			}
		}
	}
	if valued == 0 || valued == len(page.Edges) {
		t.Fatalf("%d of %d edges with values", valued, len(page.Edges))
	}
}

// The chain of TestWideEdgeValuesArePaged: wideN nodes, an edge from
// each to the one before, whose 256-channel value (1 KiB) is the edge's
// index plus the channel's thousandths; pages bounded at wideBytes.
const wideN, wideCh, wideBytes = 20000, 256, 256 << 10

type wideChainServer struct {
	ts      *httptest.Server
	at      map[string]int // a node's position → its index
	perPage int            // the rows a page holds at most
}

func newWideChain(t *testing.T) *wideChainServer {
	ctx := context.Background()
	mem, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	r := rand.New(rand.NewPCG(1, 2))
	g := &writer.Graph{ObjectIDs: make([]int64, wideN)}
	at := map[string]int{}
	vals := make([]float32, 0, (wideN-1)*wideCh)
	for i := range wideN {
		p := [3]float32{float32(r.Float64() * 100), float32(r.Float64() * 100), float32(r.Float64() * 100)}
		g.Positions = append(g.Positions, p[:]...)
		at[fmt.Sprint(p[0], p[1], p[2])] = i
		if i > 0 {
			g.Edges = append(g.Edges, int64(i), int64(i-1))
			for c := range wideCh {
				vals = append(vals, float32(i-1)+float32(c)/1000) // edge i-1's value
			}
		}
	}
	g.LinkAttributes = []writer.Attribute{writer.Float32Attribute("emb", wideCh, vals)}
	if _, err := writer.WriteGraph(ctx, mem, "g", g, writer.Options{ChunkShape: []float64{50, 50, 50}}); err != nil {
		t.Fatal(err)
	}
	_, ts := newServer(t, api.Options{JSONPageBytes: wideBytes, Stores: []*zvf.Store{zvftest.OpenSub(t, mem, "g", cache.New(64<<20))}})
	return &wideChainServer{ts: ts, at: at, perPage: wideBytes / (4 * wideCh)}
}

// walk follows the answer at path (f: json or ndjson) page by page,
// checking each page's bounds and each edge against the chain: an edge
// from a node to the one before, met once, with its own value or null.
// It returns the pages, the edges met and those with values.
func (w *wideChainServer) walk(t *testing.T, path, f string) (pages, seen, valued int) {
	t.Helper()
	perPage := w.perPage
	var verts [][]float64
	met := map[int]bool{}
	first := path
	for path != "" {
		resp, body := apitest.Get(t, w.ts, path)
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
			a := w.at[fmt.Sprint(float32(verts[e[0]][0]), float32(verts[e[0]][1]), float32(verts[e[0]][2]))]
			b := w.at[fmt.Sprint(float32(verts[e[1]][0]), float32(verts[e[1]][1]), float32(verts[e[1]][2]))]
			if a != b+1 || met[b] {
				t.Fatalf("f=%s page %d: edge %v is nodes %d→%d (seen %v)", f, pages, e, a, b, met[b])
			}
			met[b] = true
			if v := col[i]; v != nil {
				valued++
				if len(*v) != wideCh || float32((*v)[0]) != float32(b) || float32((*v)[wideCh-1]) != float32(b)+float32(wideCh-1)/1000 {
					t.Fatalf("f=%s page %d: edge %d→%d has the value of another: %v…", f, pages, a, b, (*v)[:2])
				}
			}
		}
		pages++
		path = ""
		if tail.Next != nil {
			path = first + "&cursor=" + *tail.Next
		}
	}
	return pages, len(met), valued
}
