package api_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http/httptest"
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
// does not page), most of them without a stored value. Those took zeros
// past what zvf filled (16 MiB), so the object was refused: first a 422
// "unsupported … bytes of nothing", then a 413 pointing at bbox pages.
// An edge without a value now costs no memory, so the object is one
// whole answer: every edge once, each with its own value or null.
func TestWideEdgeValuesOfAnObject(t *testing.T) {
	t.Parallel()
	whole := *newWideChain(t)
	whole.perPage = wideN // one answer of all its rows
	for _, f := range []string{"json", "ndjson"} {
		pages, seen, valued := whole.walk(t, "/api/v1/stores/g/objects/0?edge_attributes=emb&f="+f, f)
		if seen != wideN-1 || valued == 0 || valued == wideN-1 || pages != 1 {
			t.Fatalf("f=%s: %d answers, %d of %d edges, %d with values", f, pages, seen, wideN-1, valued)
		}
	}
}

// TestDenseEdgeValuesPagesWhole: a graph of 100,000 nodes, each linking
// to the three before it, scattered over 8 chunks, with a 16-channel
// float32 link attribute (64 bytes an edge). Most edges cross chunks and
// have no stored value (the 0.7 writer keeps none). A page with edge
// values is bounded at 8 MiB of them reckoned at one edge a row, so the
// default request is one page of 100,000 rows and ~300,000 edges. Before,
// zvf filled the ~260,000 edges without a value with 16 MiB of zeros at
// most, and past that failed the page after its rows had streamed: a 200
// whose body was cut at ~2 MB. An edge without a value now costs no
// memory: followed page by page, the default request answers every page
// whole in JSON, binary and Arrow, each edge once with its own value or
// null, the three formats agreeing edge for edge.
func TestDenseEdgeValuesPagesWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	const n, deg, ch = 100000, 3, 16
	r := rand.New(rand.NewPCG(3, 4))
	g := &writer.Graph{ObjectIDs: make([]int64, n)}
	at := map[[3]float32]int{} // a node's position → its index
	vals := make([]float32, 0, n*deg*ch)
	edge := map[[2]int]int{} // nodes (later, earlier) → the edge's index
	for i := range n {
		p := [3]float32{float32(r.Float64() * 100), float32(r.Float64() * 100), float32(r.Float64() * 100)}
		g.Positions = append(g.Positions, p[:]...)
		at[p] = i
		for k := 1; k <= deg && k <= i; k++ {
			edge[[2]int{i, i - k}] = len(g.Edges) / 2
			g.Edges = append(g.Edges, int64(i), int64(i-k))
			for c := range ch {
				vals = append(vals, float32(len(g.Edges)/2-1)+float32(c)/1000)
			}
		}
	}
	g.LinkAttributes = []writer.Attribute{writer.Float32Attribute("emb", ch, vals)}
	if _, err := writer.WriteGraph(ctx, mem, "g", g, writer.Options{ChunkShape: []float64{50, 50, 50}}); err != nil {
		t.Fatal(err)
	}
	_, ts := newServer(t, api.Options{Stores: []*zvf.Store{zvftest.OpenSub(t, mem, "g", cache.New(128<<20))}})
	const first = "/api/v1/stores/g/bbox?min=-1,-1,-1&max=101,101,101&edge_attributes=emb"
	var verts [][]float64
	met := map[int]bool{}
	valued, pages := 0, 0
	for path := first; path != ""; pages++ {
		resp, body := apitest.Get(t, ts, path)
		var page struct {
			Vertices       [][]float64                  `json:"vertices"`
			Edges          [][2]int                     `json:"edges"`
			EdgeAttributes map[string][]json.RawMessage `json:"edge_attributes"`
			Next           *string                      `json:"next"`
		}
		if resp.StatusCode != 200 {
			t.Fatalf("page %d: %d %.300s", pages, resp.StatusCode, body)
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatalf("page %d: %d bytes, not whole: %v (…%q)", pages, len(body), err, body[max(0, len(body)-80):])
		}
		verts = append(verts, page.Vertices...)
		col := page.EdgeAttributes["emb"]
		if len(col) != len(page.Edges) {
			t.Fatalf("page %d: %d values for %d edges", pages, len(col), len(page.Edges))
		}
		node := func(v []float64) int { return at[[3]float32{float32(v[0]), float32(v[1]), float32(v[2])}] }
		vs := make([][]float64, len(col)) // the JSON values, nil for null
		for i, e := range page.Edges {
			a, b := node(verts[e[0]]), node(verts[e[1]])
			k, ok := edge[[2]int{max(a, b), min(a, b)}]
			if !ok || met[k] {
				t.Fatalf("page %d: edge %v is nodes %d, %d: an edge %v, met before %v", pages, e, a, b, ok, met[k])
			}
			met[k] = true
			if err := json.Unmarshal(col[i], &vs[i]); err != nil {
				t.Fatalf("page %d edge %d: %s", pages, k, col[i])
			}
			if v := vs[i]; v != nil {
				valued++
				if len(v) != ch || float32(v[0]) != float32(k) || float32(v[ch-1]) != float32(k)+float32(ch-1)/1000 {
					t.Fatalf("page %d: edge %d (%d, %d) has the value of another: %v…", pages, k, a, b, v[:2])
				}
			}
		}
		// The same page in binary: the edges, then a bitmap and a row an
		// edge (zeros for one without a value).
		_, blocks := binBlocks(t, apitest.MustGet(t, ts, path+"&f=bin"))
		var edges, bvals []byte
		for _, b := range blocks {
			switch b.kind {
			case 4:
				edges = b.payload
			case 7:
				bvals = b.payload
			}
		}
		ne := len(page.Edges)
		bits := (ne + 63) / 64 * 8
		if len(edges) != 8*ne || len(bvals) != bits+4*ch*ne {
			t.Fatalf("page %d f=bin: edges block of %d bytes, edge attribute block of %d, for %d edges", pages, len(edges), len(bvals), ne)
		}
		for i, e := range page.Edges {
			if a, b := binary.LittleEndian.Uint32(edges[8*i:]), binary.LittleEndian.Uint32(edges[8*i+4:]); int(a) != e[0] || int(b) != e[1] {
				t.Fatalf("page %d f=bin edge %d: %d-%d, JSON %v", pages, i, a, b, e)
			}
			if valid := bvals[i>>3]&(1<<(i&7)) != 0; valid != (vs[i] != nil) {
				t.Fatalf("page %d f=bin edge %d: valid %v, JSON %s", pages, i, valid, col[i])
			}
			for c := range ch {
				got, want := math.Float32frombits(binary.LittleEndian.Uint32(bvals[bits+4*(i*ch+c):])), float32(0)
				if vs[i] != nil {
					want = float32(vs[i][c])
				}
				if got != want {
					t.Fatalf("page %d f=bin edge %d channel %d: %v, JSON %s", pages, i, c, got, col[i])
				}
			}
		}
		// And in Arrow's edges table: the values as JSON writes them.
		s := readArrow(t, apitest.MustGet(t, ts, path+"&f=arrow&table=edges"))
		v0, v1, av := s.column(t, "v0"), s.column(t, "v1"), s.column(t, "emb")
		if len(av) != ne || len(v0) != ne {
			t.Fatalf("page %d f=arrow: %d rows, %d values; JSON %d edges", pages, len(v0), len(av), ne)
		}
		for i, e := range page.Edges {
			if v0[i] != strconv.Itoa(e[0]) || v1[i] != strconv.Itoa(e[1]) || av[i] != string(col[i]) {
				t.Fatalf("page %d f=arrow edge %d: %s-%s %.80s; JSON %v %.80s", pages, i, v0[i], v1[i], av[i], e, col[i])
			}
		}
		path = ""
		if page.Next != nil {
			path = first + "&cursor=" + *page.Next
		}
	}
	if want := n*deg - 6; len(met) != want || valued == 0 || valued == want {
		t.Fatalf("%d pages: %d of %d edges, %d with values", pages, len(met), want, valued)
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
