package zvf_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/demo"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

// TestLineAnswerMemoryFollowsTheAnswer: a warm bbox of a few streamline
// vertices, with their edges and object ids, from chunks of thousands of
// rows allocates in proportion to what the answer holds, not to the
// chunks it cuts (issue 25, item 2: each request used to rank every row
// of every chunk it touched, and rebuild every row's object). The box
// sits where eight chunks of about 5,000 rows meet.
func TestLineAnswerMemoryFollowsTheAnswer(t *testing.T) {
	alloctest.SkipUnderRace(t)
	ctx := context.Background()
	l := walkLines(t)
	q := zvf.BBoxQuery{Min: []float64{400, 400, 400}, Max: []float64{600, 600, 600}, Connectivity: true}
	var res zvf.BBoxResult
	var err error
	ids := 0
	run := func() {
		ids = 0
		if res, err = l.BBox(ctx, q, func(b *zvf.Batch) error { ids += len(b.ObjectIDs); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	run() // warm
	if res.Count == 0 || len(res.Edges) == 0 || ids != int(res.Count) || res.Chunks != 8 {
		t.Fatalf("the box holds %d vertices, %d edges, %d ids from %d chunks", res.Count, len(res.Edges)/2, ids, res.Chunks)
	}
	const runs = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		run()
	}
	runtime.ReadMemStats(&after)
	per := float64(after.TotalAlloc-before.TotalAlloc) / runs
	// The answer's own: its edges (16 bytes an index pair a vertex, about)
	// and a few hundred bytes a chunk; the chunks hold 40,000 rows.
	limit := 4096 + 48*float64(res.Count)
	t.Logf("%d vertices, %d edges from %d chunks: %.0f bytes allocated per query (limit %.0f)", res.Count, len(res.Edges)/2, res.Chunks, per, limit)
	if per > limit {
		t.Fatalf("%.0f bytes allocated per query for %d vertices, want at most %.0f", per, res.Count, limit)
	}
}

// TestWarmLineAllocsFollowNoChunkCount: a warm streamline bbox in the
// binary format's form (edges and ids as the wire takes them, the
// server's reused edge buffer) allocates as much for a box of a hundred
// chunks as for a box inside one: its per-chunk memory (ranked chunks,
// their rows, the page's chunk list) is the pooled scratch's. The page's
// chunk list grew by append from nil on every answer (9 kB and about ten
// allocations a request of the bench's level=auto box, 310 chunks).
// The level's table is off: its build, which the first answer starts in
// the background, allocated during the count on a loaded machine (CI:
// 1.0 allocations an answer of 185 chunks).
func TestWarmLineAllocsFollowNoChunkCount(t *testing.T) {
	alloctest.SkipUnderRace(t)
	ctx := context.Background()
	l := walkLinesIn(t, 100) // chunks of 100 units: 1,000 of them
	zvf.WithoutLevelTables(zvf.StoreOf(l))
	allocs := func(lo, hi float64) (float64, int) {
		q := zvf.BBoxQuery{Min: []float64{lo, lo, lo}, Max: []float64{hi, hi, hi}, Connectivity: true, Wire: true}
		var res zvf.BBoxResult
		run := func() {
			var err error
			if res, err = l.BBox(ctx, q, func(*zvf.Batch) error { return nil }); err != nil {
				t.Fatal(err)
			}
			q.WireBuf = res.WireEdges[:0] // as the server's pool gives it back
		}
		run() // warm: the chunks cached and prepared, the buffers grown
		run()
		if res.Count == 0 || len(res.WireEdges) == 0 {
			t.Fatalf("box [%g, %g]: %d vertices, %d edge bytes", lo, hi, res.Count, len(res.WireEdges))
		}
		return testing.AllocsPerRun(20, run), res.Chunks
	}
	one, c1 := allocs(420, 480)
	many, cm := allocs(200, 700)
	t.Logf("%d chunk(s): %.1f allocations; %d chunks: %.1f", c1, one, cm, many)
	if c1 != 1 || cm < 100 {
		t.Fatalf("the boxes hold %d and %d chunks, want 1 and at least 100", c1, cm)
	}
	if n := zvf.TableBuilds(l); n != 0 {
		t.Fatalf("%d level table builds ran beside the count", n)
	}
	if many > one {
		t.Fatalf("a warm answer of %d chunks allocates %.1f times, one of a single chunk %.1f: per-chunk allocations", cm, many, one)
	}
}

// walkLines is level 0 of a store of 1,000 random walks of 40 vertices in
// a 1,000-unit cube, in chunks of 500 (about 5,000 rows each).
func walkLines(t *testing.T) *zvf.Level {
	t.Helper()
	return walkLinesIn(t, 500)
}

// walkLinesIn is walkLines in chunks of the given edge.
func walkLinesIn(t *testing.T, chunk float64) *zvf.Level {
	t.Helper()
	r := rand.New(rand.NewPCG(5, 5))
	const lines, perLine = 1000, 40
	pos := make([]float32, 0, 3*lines*perLine)
	offsets := []int{0}
	for range lines {
		p := [3]float64{r.Float64() * 1000, r.Float64() * 1000, r.Float64() * 1000}
		for range perLine {
			for k := range p {
				p[k] = min(999.9, max(0, p[k]+r.NormFloat64()*4))
				pos = append(pos, float32(p[k]))
			}
		}
		offsets = append(offsets, len(pos)/3)
	}
	st := zvftest.Store(t, "mem://")
	if _, err := writer.WritePolylines(context.Background(), st, "lines", &writer.Polylines{Positions: pos, Offsets: offsets},
		writer.Options{ChunkShape: []float64{chunk, chunk, chunk}, BinShape: []float64{chunk / 5, chunk / 5, chunk / 5}}); err != nil {
		t.Fatal(err)
	}
	return zvftest.OpenLevel(t, storage.Sub(st, "lines"), zvf.Options{Name: "lines", Cache: cache.New(1 << 30)}, 0)
}

// TestEdgeBuf: a line answer built in the caller's EdgeBuf has the edges
// it has without one, in the buffer's array (whatever the buffer held
// before), allocates nothing for them, and an empty answer still has an
// empty, not absent, edge list.
func TestEdgeBuf(t *testing.T) {
	ctx := context.Background()
	l := walkLines(t)
	q := zvf.BBoxQuery{Min: []float64{400, 400, 400}, Max: []float64{600, 600, 600}, Connectivity: true}
	none := func(*zvf.Batch) error { return nil }
	want, err := l.BBox(ctx, q, none)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Edges) == 0 {
		t.Fatal("the box has no edges")
	}
	buf := make([]int64, 7, 4*len(want.Edges))
	for i := range buf {
		buf[i] = -1
	}
	q.EdgeBuf = buf
	got, err := l.BBox(ctx, q, none)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Edges, want.Edges) {
		t.Fatalf("with EdgeBuf: %d indices %v..., without: %d %v...", len(got.Edges), got.Edges[:min(8, len(got.Edges))], len(want.Edges), want.Edges[:8])
	}
	if &got.Edges[0] != &buf[:1][0] {
		t.Error("the edges were not built in EdgeBuf's array")
	}
	if !alloctest.Race {
		with := testing.AllocsPerRun(20, func() { _, _ = l.BBox(ctx, q, none) })
		per := func(q zvf.BBoxQuery) float64 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range 20 {
				_, _ = l.BBox(ctx, q, none)
			}
			runtime.ReadMemStats(&after)
			return float64(after.TotalAlloc-before.TotalAlloc) / 20
		}
		withBytes, withoutBytes := per(q), per(zvf.BBoxQuery{Min: q.Min, Max: q.Max, Connectivity: true})
		t.Logf("%d edges: %.0f bytes a query with EdgeBuf (%.0f allocations), %.0f without", len(want.Edges)/2, withBytes, with, withoutBytes)
		if edges := float64(8 * len(want.Edges)); withBytes > withoutBytes-edges {
			t.Errorf("%.0f bytes a query with EdgeBuf, %.0f without: the %.0f of the edges are still allocated", withBytes, withoutBytes, edges)
		}
	}
	q.Min, q.Max = []float64{2000, 2000, 2000}, []float64{2001, 2001, 2001}
	q.EdgeBuf = nil
	empty, err := l.BBox(ctx, q, none)
	if err != nil {
		t.Fatal(err)
	}
	if empty.Count != 0 || empty.Edges == nil || len(empty.Edges) != 0 {
		t.Errorf("outside the store: %d rows, edges %#v; want none, and an empty list", empty.Count, empty.Edges)
	}
}

// answerBytes is a bbox answer in the order it came out: every batch's
// vertices and object ids, then each page's edges.
func answerBytes(t *testing.T, l *zvf.Level, q zvf.BBoxQuery, limit int64) string {
	t.Helper()
	var out bytes.Buffer
	q.Limit = limit
	for pages := 0; ; pages++ {
		res, err := l.BBox(context.Background(), q, func(b *zvf.Batch) error {
			fmt.Fprintf(&out, "batch %s %d %x %v\n", b.Chunk, b.First, b.Vertices.Data, b.ObjectIDs)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "page %d: %d rows, edges %v\n", pages, res.Count, res.Edges)
		if !res.More {
			return out.String()
		}
		q.Resume = res.Next
	}
}

// TestPreparedChunksAnswerAsTheWalk: a streamline answer from the chunks'
// preparations (object ids and edges from the rows the box holds) is
// byte for byte the answer of the full walk of every chunk's rows, in the
// same order, whole and in pages, for boxes that cover chunks, cut them,
// and miss them, on the demo streamlines and a store whose streamlines
// cross chunks many times.
func TestPreparedChunksAnswerAsTheWalk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := zvftest.Store(t, "mem://")
	r := rand.New(rand.NewPCG(11, 3))
	pos := make([]float32, 0, 3*300*60)
	offsets := []int{0}
	for range 300 {
		p := [3]float64{r.Float64() * 100, r.Float64() * 100, r.Float64() * 100}
		for range 60 {
			for k := range p {
				p[k] = min(99.9, max(0, p[k]+r.NormFloat64()*3))
				pos = append(pos, float32(p[k]))
			}
		}
		offsets = append(offsets, len(pos)/3)
	}
	if _, err := writer.WritePolylines(ctx, st, "lines", &writer.Polylines{Positions: pos, Offsets: offsets},
		writer.Options{ChunkShape: []float64{25, 25, 25}, BinShape: []float64{5, 5, 5}}); err != nil {
		t.Fatal(err)
	}
	if _, err := demo.Build(ctx, st, demo.Options{Seed: 3, Scale: 0.1}); err != nil {
		t.Fatal(err)
	}
	v09 := zvftest.Store(t, "mem://")
	if err := zvftest.To09(ctx, storage.Sub(st, "axons"), v09, zvftest.To09Options{}); err != nil {
		t.Fatal(err)
	}
	subs := map[string]storage.Store{"lines": storage.Sub(st, "lines"), "axons": storage.Sub(st, "axons"), "axons-v09": v09}
	open := func(t *testing.T, name string) *zvf.Store {
		s, err := zvf.Open(ctx, subs[name], zvf.Options{Name: name, Cache: cache.New(1 << 30)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, name := range []string{"lines", "axons", "axons-v09"} {
		t.Run(name, func(t *testing.T) {
			prepared, walked := open(t, name), open(t, name)
			for _, n := range prepared.Levels() {
				lp, _ := prepared.Level(n)
				lw, _ := walked.Level(n)
				if err := zvf.WalkWithoutPreparation(ctx, lw); err != nil {
					t.Fatal(err)
				}
				for bi, box := range boxes(prepared) {
					q := zvf.BBoxQuery{Min: box[0], Max: box[1], Connectivity: true}
					for _, limit := range []int64{0, 1 + r.Int64N(900)} {
						got, want := answerBytes(t, lp, q, limit), answerBytes(t, lw, q, limit)
						if got != want {
							t.Fatalf("level %d box %d limit %d: the prepared answer differs from the walk:\n%.600s\nwant\n%.600s", n, bi, limit, got, want)
						}
						if limit == 0 && bi == 0 && strings.Contains(got, "edges []") {
							t.Fatalf("level %d: the whole store's answer has no edges to compare", n)
						}
					}
				}
			}
		})
	}
}

// TestWireForm: a line answer asked for in the binary format's wire form
// (BBoxQuery.Wire) carries the edges and object ids it carries without
// it, as little-endian uint32 pairs and int64, on boxes that cover, cut
// or miss chunks and on every page of a paged answer; the edges are
// built in WireBuf's array.
func TestWireForm(t *testing.T) {
	ctx := context.Background()
	l := walkLines(t)
	boxes := [][2][]float64{
		{{400, 400, 400}, {600, 600, 600}},  // eight cut chunks
		{{0, 0, 0}, {499.99, 999.9, 999.9}}, // covered chunks
		{{0, 0, 0}, {1000, 1000, 1000}},     // the whole level
		{{123, 7, 300}, {777, 512, 901}},
		{{2000, 2000, 2000}, {2001, 2001, 2001}}, // empty
	}
	for _, box := range boxes {
		for _, limit := range []int64{0, 997, 5000} {
			t.Run(fmt.Sprintf("%v-%v/limit=%d", box[0], box[1], limit), func(t *testing.T) {
				q := zvf.BBoxQuery{Min: box[0], Max: box[1], Connectivity: true, Limit: limit}
				w := q
				w.Wire = true
				w.WireBuf = make([]byte, 3, 1<<20)
				for page := 0; ; page++ {
					var ids, wids []byte
					want, err := l.BBox(ctx, q, func(b *zvf.Batch) error {
						if b.WireIDs != nil {
							t.Fatal("WireIDs without Wire")
						}
						for _, id := range b.ObjectIDs {
							ids = binary.LittleEndian.AppendUint64(ids, uint64(id))
						}
						return nil
					})
					if err != nil {
						t.Fatal(err)
					}
					got, err := l.BBox(ctx, w, func(b *zvf.Batch) error {
						if b.ObjectIDs != nil || len(b.WireIDs) != 8*b.Rows {
							t.Fatalf("a batch of %d rows with %d ids and %d wire bytes", b.Rows, len(b.ObjectIDs), len(b.WireIDs))
						}
						wids = append(wids, b.WireIDs...)
						return nil
					})
					if err != nil {
						t.Fatal(err)
					}
					var edges []byte
					for _, v := range want.Edges {
						edges = binary.LittleEndian.AppendUint32(edges, uint32(v))
					}
					if got.Edges != nil || got.WireEdges == nil || !bytes.Equal(got.WireEdges, edges) {
						t.Fatalf("page %d: wire edges %d bytes (int64 list %v), want %d bytes", page, len(got.WireEdges), got.Edges != nil, len(edges))
					}
					if len(edges) > 0 && &got.WireEdges[0] != &w.WireBuf[:1][0] {
						t.Error("the wire edges were not built in WireBuf's array")
					}
					if !bytes.Equal(wids, ids) || got.Count != want.Count || got.More != want.More {
						t.Fatalf("page %d: %d rows, %d id bytes; want %d rows, %d", page, got.Count, len(wids), want.Count, len(ids))
					}
					if !want.More {
						break
					}
					q.Resume, w.Resume = want.Next, got.Next
				}
			})
		}
	}
}

// TestWireObject: WireObject is Object with a line's edges in the wire's
// form: the same vertices and attributes, and WireEdges the little-endian
// uint32 pairs of Object's edges (none for a one-row line), Edges nil.
func TestWireObject(t *testing.T) {
	ctx := context.Background()
	l := walkLines(t)
	for _, id := range []int64{0, 1, 500, 999} {
		want, err := l.Object(ctx, id, []string{"*"})
		if err != nil {
			t.Fatal(err)
		}
		got, err := l.WireObject(ctx, id, []string{"*"})
		if err != nil {
			t.Fatal(err)
		}
		var wire []byte
		for _, e := range want.Edges {
			wire = binary.LittleEndian.AppendUint32(wire, uint32(e))
		}
		if len(want.Edges) == 0 || want.WireEdges != nil || got.Edges != nil || !bytes.Equal(got.WireEdges, wire) {
			t.Fatalf("object %d: Object has %d edges (wire %d bytes), WireObject %d edges and %d wire bytes, want %d",
				id, len(want.Edges)/2, len(want.WireEdges), len(got.Edges)/2, len(got.WireEdges), len(wire))
		}
		if got.Count != want.Count || !bytes.Equal(got.Vertices.Data, want.Vertices.Data) || len(got.Attributes) != len(want.Attributes) {
			t.Fatalf("object %d: WireObject's %d rows are not Object's %d", id, got.Count, want.Count)
		}
	}
}
