package api_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"runtime"
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
// attributes: with a 256 KiB page bound, the values of 256 edges a page
// (the edges without one cost none). Walked page by
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
// have no stored value (the 0.7 writer keeps none), so the ~37,000 with
// one hold ~2.4 MB, under a page's 8 MiB of edge values: the default
// request is one page of 100,000 rows and ~300,000 edges. Before, zvf
// filled the ~260,000 edges without a value with 16 MiB of zeros at
// most, and past that failed the page after its rows had streamed: a 200
// whose body was cut at ~2 MB. An edge without a value now costs no
// memory: followed page by page, the default request answers every page
// whole in JSON, binary and Arrow, each edge once with its own value or
// null, the three formats agreeing edge for edge.
func TestDenseEdgeValuesPagesWhole(t *testing.T) {
	t.Parallel()
	d := newDenseGraph(t, 100000, []float64{50, 50, 50}, 0)
	pages := d.walk(t, func(int, denseGraphPage) {})
	if want := d.n*denseDeg - 6; len(d.met) != want || d.valued == 0 || d.valued == want {
		t.Fatalf("%d pages: %d of %d edges, %d with values", pages, len(d.met), want, d.valued)
	}
}

// TestDenseEdgeValuesBoundPages: the graph of TestDenseEdgeValuesPagesWhole
// in one chunk, so every edge has a stored value: 20,000 nodes carry
// ~60,000 edges, 3.8 MB of values, with pages bounded at 1 MiB. Pages
// were sized at an edge a row (16,384 rows) and so held ~49,000 edges,
// 3.1 MB of values, three times the bound, which a denser graph would
// multiply. zvf now counts each row's edges from the chunk's links, so
// every page's edge values fit 1 MiB (and fill at least half of it: rows
// are not given up for nothing), every edge still comes once in JSON,
// binary and Arrow, and what a JSON page allocates on the server, its
// chunks cached, is bounded by the page's bound, not the answer's edges.
func TestDenseEdgeValuesBoundPages(t *testing.T) {
	const hold = 1 << 20
	d := newDenseGraph(t, 20000, []float64{200, 200, 200}, hold)
	d.walk(t, func(int, denseGraphPage) {}) // the cache warmed
	d.met, d.valued = map[int]bool{}, 0
	var worst uint64
	pages := d.walk(t, func(i int, p denseGraphPage) {
		stored := 0
		for _, v := range p.vals {
			if v != nil {
				stored++
			}
		}
		if b := stored * 4 * denseCh; b > hold || (p.next != "" && b < hold/2) {
			t.Errorf("page %d: %d edges, %d bytes of values; a page holds at most %d", i, len(p.vals), b, hold)
		}
		worst = max(worst, d.allocated(t, p.path))
	})
	if want := d.n*denseDeg - 6; len(d.met) != want || d.valued != want || pages < 4 {
		t.Fatalf("%d pages: %d of %d edges, %d with values", pages, len(d.met), want, d.valued)
	}
	// What a page allocates beside its bounded values: its rows' text
	// rounds, the page's edges and where each is stored (~50 bytes an
	// edge, grown by appending), its chunk's rows listed, the compressor
	// (~7 MB in all here; ~40 MB when the values' text was built whole).
	if worst > 10*hold {
		t.Errorf("a JSON page allocated %d bytes on the server; its edge values are bounded at %d", worst, hold)
	}
	t.Logf("%d pages, a JSON page allocated at most %d bytes", pages, worst)
}

// denseDeg, denseCh: a dense graph's node links to the denseDeg before
// it, each link with denseCh float32 values (the edge's index plus the
// channel's thousandths).
const denseDeg, denseCh = 3, 16

// denseGraph is a server of a dense graph (newDenseGraph) and what a walk
// of its answer met: the edges by index and how many had values.
type denseGraph struct {
	ts     *httptest.Server
	n      int
	at     map[[3]float32]int // a node's position → its index
	edge   map[[2]int]int     // nodes (later, earlier) → the edge's index
	met    map[int]bool
	valued int
}

// denseGraphPage is one page of a walk: its path, its edges' JSON values
// (nil for null) and the next page's cursor ("" on the last).
type denseGraphPage struct {
	path, next string
	vals       [][]float64
}

// newDenseGraph serves n nodes at random in [0, 100)³, each linking to
// the denseDeg before it, written in chunks of shape, with JSON pages
// bounded at hold bytes (0: the default).
func newDenseGraph(t *testing.T, n int, shape []float64, hold int64) *denseGraph {
	ctx := context.Background()
	mem, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	r := rand.New(rand.NewPCG(3, 4))
	g := &writer.Graph{ObjectIDs: make([]int64, n)}
	d := &denseGraph{n: n, at: map[[3]float32]int{}, edge: map[[2]int]int{}, met: map[int]bool{}}
	vals := make([]float32, 0, n*denseDeg*denseCh)
	for i := range n {
		p := [3]float32{float32(r.Float64() * 100), float32(r.Float64() * 100), float32(r.Float64() * 100)}
		g.Positions = append(g.Positions, p[:]...)
		d.at[p] = i
		for k := 1; k <= denseDeg && k <= i; k++ {
			d.edge[[2]int{i, i - k}] = len(g.Edges) / 2
			g.Edges = append(g.Edges, int64(i), int64(i-k))
			for c := range denseCh {
				vals = append(vals, float32(len(g.Edges)/2-1)+float32(c)/1000)
			}
		}
	}
	g.LinkAttributes = []writer.Attribute{writer.Float32Attribute("emb", denseCh, vals)}
	if _, err := writer.WriteGraph(ctx, mem, "g", g, writer.Options{ChunkShape: shape}); err != nil {
		t.Fatal(err)
	}
	_, d.ts = newServer(t, api.Options{JSONPageBytes: hold, Stores: []*zvf.Store{zvftest.OpenSub(t, mem, "g", cache.New(128<<20))}})
	return d
}

// walk follows the whole box's answer with edge_attributes=emb page by
// page, in JSON, binary and Arrow, checking each edge against the graph
// (met once, with its own value or null) and the three formats against
// each other, and gives each page to check. It returns the pages.
func (d *denseGraph) walk(t *testing.T, check func(int, denseGraphPage)) int {
	t.Helper()
	const first = "/api/v1/stores/g/bbox?min=-1,-1,-1&max=101,101,101&edge_attributes=emb"
	var verts [][]float64
	pages := 0
	for path := first; path != ""; pages++ {
		resp, body := apitest.Get(t, d.ts, path)
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
		node := func(v []float64) int { return d.at[[3]float32{float32(v[0]), float32(v[1]), float32(v[2])}] }
		vs := make([][]float64, len(col)) // the JSON values, nil for null
		for i, e := range page.Edges {
			a, b := node(verts[e[0]]), node(verts[e[1]])
			k, ok := d.edge[[2]int{max(a, b), min(a, b)}]
			if !ok || d.met[k] {
				t.Fatalf("page %d: edge %v is nodes %d, %d: an edge %v, met before %v", pages, e, a, b, ok, d.met[k])
			}
			d.met[k] = true
			if err := json.Unmarshal(col[i], &vs[i]); err != nil {
				t.Fatalf("page %d edge %d: %s", pages, k, col[i])
			}
			if v := vs[i]; v != nil {
				d.valued++
				if len(v) != denseCh || float32(v[0]) != float32(k) || float32(v[denseCh-1]) != float32(k)+float32(denseCh-1)/1000 {
					t.Fatalf("page %d: edge %d (%d, %d) has the value of another: %v…", pages, k, a, b, v[:2])
				}
			}
		}
		d.sameInBinary(t, pages, path, page.Edges, vs, col)
		d.sameInArrow(t, pages, path, page.Edges, col)
		next := ""
		if page.Next != nil {
			next = first + "&cursor=" + *page.Next
		}
		check(pages, denseGraphPage{path: path, next: next, vals: vs})
		path = next
	}
	return pages
}

// sameInBinary checks page i at path in binary: the edges, then a bitmap
// and a row an edge (zeros for one without a value), as JSON gave them
// (vs decoded, col as written).
func (d *denseGraph) sameInBinary(t *testing.T, i int, path string, jedges [][2]int, vs [][]float64, col []json.RawMessage) {
	t.Helper()
	_, blocks := binBlocks(t, apitest.MustGet(t, d.ts, path+"&f=bin"))
	var edges, bvals []byte
	for _, b := range blocks {
		switch b.kind {
		case 4:
			edges = b.payload
		case 7:
			bvals = b.payload
		}
	}
	ne := len(jedges)
	bits := (ne + 63) / 64 * 8
	if len(edges) != 8*ne || len(bvals) != bits+4*denseCh*ne {
		t.Fatalf("page %d f=bin: edges block of %d bytes, edge attribute block of %d, for %d edges", i, len(edges), len(bvals), ne)
	}
	for k, e := range jedges {
		if a, b := binary.LittleEndian.Uint32(edges[8*k:]), binary.LittleEndian.Uint32(edges[8*k+4:]); int(a) != e[0] || int(b) != e[1] {
			t.Fatalf("page %d f=bin edge %d: %d-%d, JSON %v", i, k, a, b, e)
		}
		if valid := bvals[k>>3]&(1<<(k&7)) != 0; valid != (vs[k] != nil) {
			t.Fatalf("page %d f=bin edge %d: valid %v, JSON %s", i, k, valid, col[k])
		}
		for c := range denseCh {
			got, want := math.Float32frombits(binary.LittleEndian.Uint32(bvals[bits+4*(k*denseCh+c):])), float32(0)
			if vs[k] != nil {
				want = float32(vs[k][c])
			}
			if got != want {
				t.Fatalf("page %d f=bin edge %d channel %d: %v, JSON %s", i, k, c, got, col[k])
			}
		}
	}
}

// sameInArrow checks page i at path in Arrow's edges table: the values
// as JSON writes them.
func (d *denseGraph) sameInArrow(t *testing.T, i int, path string, jedges [][2]int, col []json.RawMessage) {
	t.Helper()
	s := readArrow(t, apitest.MustGet(t, d.ts, path+"&f=arrow&table=edges"))
	v0, v1, av := s.column(t, "v0"), s.column(t, "v1"), s.column(t, "emb")
	if len(av) != len(jedges) || len(v0) != len(jedges) {
		t.Fatalf("page %d f=arrow: %d rows, %d values; JSON %d edges", i, len(v0), len(av), len(jedges))
	}
	for k, e := range jedges {
		if v0[k] != strconv.Itoa(e[0]) || v1[k] != strconv.Itoa(e[1]) || av[k] != string(col[k]) {
			t.Fatalf("page %d f=arrow edge %d: %s-%s %.80s; JSON %v %.80s", i, k, v0[k], v1[k], av[k], e, col[k])
		}
	}
}

// allocated is the bytes the process allocated while the JSON answer at
// path was served, its body read into nothing: what the server allocated
// for it, the test being alone (not parallel) and the client's share
// small.
func (d *denseGraph) allocated(t *testing.T, path string) uint64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	resp, err := d.ts.Client().Get(d.ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s: %d %v", path, resp.StatusCode, err)
	}
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// The chain of TestWideEdgeValuesArePaged: wideN nodes, an edge from
// each to the one before, whose 256-channel value (1 KiB) is the edge's
// index plus the channel's thousandths; pages bounded at wideBytes.
const wideN, wideCh, wideBytes = 20000, 256, 256 << 10

type wideChainServer struct {
	ts      *httptest.Server
	at      map[string]int // a node's position → its index
	perPage int            // the edge values a page holds at most
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
		stored := 0
		for _, v := range tail.EdgeAttributes["emb"] {
			if v != nil {
				stored++
			}
		}
		if stored > perPage {
			t.Fatalf("f=%s page %d: %d rows, %d edges, %d with values; a page holds the values of at most %d", f, pages, len(tail.Vertices), len(tail.Edges), stored, perPage)
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
