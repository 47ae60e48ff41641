package zvf_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/faultstore"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// tableAnswer runs q on l and writes everything a caller sees of the
// answer — every batch's fields and bytes, the result's counts, cursor
// and edges — into one byte string.
func tableAnswer(t *testing.T, l *zvf.Level, q zvf.BBoxQuery) ([]byte, zvf.BBoxResult) {
	t.Helper()
	b, res, err := answerOf(l, q)
	if err != nil {
		t.Fatalf("bbox %v–%v: %v", q.Min, q.Max, err)
	}
	return b, res
}

// answerOf is tableAnswer's answer, or its error.
func answerOf(l *zvf.Level, q zvf.BBoxQuery) ([]byte, zvf.BBoxResult, error) {
	var b bytes.Buffer
	res, err := l.BBox(context.Background(), q, func(bt *zvf.Batch) error {
		fmt.Fprintf(&b, "batch %v rows %d first %d ids %v attrs %d\n", bt.Chunk, bt.Rows, bt.First, bt.ObjectIDs, len(bt.Attributes))
		b.Write(bt.Vertices.Data)
		b.Write(bt.WireIDs)
		for _, a := range bt.Attributes {
			fmt.Fprintf(&b, "attr %s\n", a.Name)
			b.Write(a.Data)
		}
		if s := bt.Source; s != nil {
			lo, hi, ok := s.Span()
			fmt.Fprintf(&b, "source %d %d %v %v\n", lo, hi, ok, s.Rows())
		}
		return nil
	})
	if err != nil {
		return nil, res, err
	}
	fmt.Fprintf(&b, "count %d matched %d %v more %v chunks %d edges %v faces %v/%d wire %v\n",
		res.Count, res.Matched, res.MatchedKnown, res.More, res.Chunks, res.Edges, res.Faces, res.FaceWidth, res.WireEdges == nil)
	b.Write(res.WireEdges)
	if res.Next != nil {
		b.Write(res.Next.Append(nil, 1<<20))
	}
	return b.Bytes(), res, nil
}

// tableStores are the stores the level-table tests compare on: synthetic
// streamlines in 0.7 and 0.9, the reference polylines in both, and
// points (which never take a table).
func tableStores(t *testing.T) map[string]func() storage.Store {
	ctx := context.Background()
	lines := func() storage.Store {
		st, err := synth.Streamlines(ctx, 30_000, 7)
		if err != nil {
			t.Fatal(err)
		}
		return storage.Sub(st, "streamlines")
	}
	return map[string]func() storage.Store{
		"streamlines07": lines,
		"streamlines09": func() storage.Store {
			dst := zvftest.Store(t, "mem://")
			if err := zvftest.To09(ctx, lines(), dst, zvftest.To09Options{}); err != nil {
				t.Fatal(err)
			}
			return dst
		},
		"polylines07": func() storage.Store { return zvftest.Store(t, filepath.Join(fixtures, "polylines.zarrvectors")) },
		"polylines09": func() storage.Store { return to09(t, "polylines", zvftest.To09Options{}) },
		"points": func() storage.Store {
			st, err := synth.Points(ctx, 20_000, 3, writer.CodecNone)
			if err != nil {
				t.Fatal(err)
			}
			return storage.Sub(st, "points")
		},
	}
}

// TestLevelTableAnswersAsPerChunk: on random boxes, levels and page
// sizes, a store answering from its level tables gives, byte for byte,
// the per-chunk path's answers (batches, ids, counts, cursors, edges),
// pages after the first included; and the viewer's default request
// (connectivity, wire form, one page) does come from a table on every
// line store (given tables on levels of any chunk size).
func TestLevelTableAnswersAsPerChunk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, open := range tableStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := open()
			withT, err := zvf.Open(ctx, st, zvf.Options{Name: name, Cache: cache.New(256 << 20)})
			if err != nil {
				t.Fatal(err)
			}
			without, err := zvf.Open(ctx, st, zvf.Options{Name: name, Cache: cache.New(256 << 20)})
			if err != nil {
				t.Fatal(err)
			}
			zvf.WithoutLevelTables(without)
			zvf.WithLevelTablesOfAnyChunk(withT) // every level compared, large chunks too
			bounds := withT.Info().Bounds
			r := rand.New(rand.NewPCG(uint64(len(name)), 5))
			tables := int64(0)
			for _, n := range withT.Levels() {
				a, _ := withT.Level(n)
				b, _ := without.Level(n)
				for k := range 40 {
					min, max := make([]float64, len(bounds[0])), make([]float64, len(bounds[0]))
					for d := range min {
						lo, hi := bounds[0][d], bounds[1][d]
						ext := hi - lo
						x, y := lo-0.1*ext+1.2*ext*r.Float64(), lo-0.1*ext+1.2*ext*r.Float64()
						if k%5 == 0 { // the whole level, faces on the data's
							x, y = lo, hi
						}
						min[d], max[d] = x, y
						if x > y {
							min[d], max[d] = y, x
						}
					}
					if k%6 == 4 {
						// An infinite face: no cover runs, so the table's
						// answer matches its chunks as the per-chunk path does.
						min[0] = math.Inf(-1)
					}
					q := zvf.BBoxQuery{Min: min, Max: max, Connectivity: true, Wire: k%7 != 3}
					switch k % 4 {
					case 1:
						q.Limit = 1 + r.Int64N(200)
					case 2:
						q.Limit = 100_000
					}
					// Twice: the first answer of a level reads only its box,
					// the second builds the table.
					for range 2 {
						for page := 0; page < 4; page++ {
							got, res := tableAnswer(t, a, q)
							want, _ := tableAnswer(t, b, q)
							if !bytes.Equal(got, want) {
								t.Fatalf("level %d box %v–%v limit %d page %d: answers differ\n got %.400q\nwant %.400q", n, min, max, q.Limit, page, got, want)
							}
							if res.Next == nil {
								break
							}
							q.Resume = res.Next
						}
						q.Resume = nil
					}
				}
				if zvf.TableAnswers(b) != 0 {
					t.Fatalf("level %d: the per-chunk store answered from a table", n)
				}
				tables += zvf.TableAnswers(a)
			}
			if line := name != "points"; line != (tables > 0) {
				t.Fatalf("%d answers from level tables", tables)
			}
		})
	}
}

// TestLevelTableCorruptChunk: a level with a corrupt chunk outside the
// box answers the box as before (from its chunks, no table is kept), and
// a box that reaches the corrupt chunk fails with ErrCorrupt as it did.
func TestLevelTableCorruptChunk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := synth.Streamlines(ctx, 30_000, 7)
	if err != nil {
		t.Fatal(err)
	}
	sub := storage.Sub(st, "streamlines")
	s, err := zvf.Open(ctx, sub, zvf.Options{Name: "lines", Cache: cache.New(256 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := s.Level(1)
	keys := l.Keys()
	bad := keys[len(keys)-1]
	// The last chunk's vertices cut short: a decode of it fails.
	path := fmt.Sprintf("streamlines/1/vertices/%d.%d.%d/c/0", bad[0], bad[1], bad[2])
	if _, err := st.Get(ctx, path, storage.ReadOptions{Max: 1 << 20}); err != nil {
		t.Fatal(err) // not where a 0.7 store keeps it
	}
	if err := st.Put(ctx, path, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	first := keys[0]
	cs := l.Info().ChunkShape
	min, max := make([]float64, 3), make([]float64, 3)
	for d := range 3 {
		min[d], max[d] = float64(first[d])*cs[d], float64(first[d]+1)*cs[d]
	}
	q := zvf.BBoxQuery{Min: min, Max: max, Connectivity: true, Wire: true}
	var answers [3][]byte
	for i := range answers {
		answers[i], _ = tableAnswer(t, l, q)
	}
	if !bytes.Equal(answers[0], answers[2]) || !bytes.Equal(answers[1], answers[2]) {
		t.Fatal("answers of one box differ")
	}
	if zvf.TableCached(l) || zvf.TableAnswers(l) != 0 {
		t.Fatalf("a table was kept (%v) or answered (%d) with a corrupt chunk", zvf.TableCached(l), zvf.TableAnswers(l))
	}
	whole := zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Connectivity: true, Wire: true}
	_, err = l.BBox(ctx, whole, func(*zvf.Batch) error { return nil })
	if !errors.Is(err, zvf.ErrCorrupt) {
		t.Fatalf("the whole level: %v, want ErrCorrupt", err)
	}
}

// TestLevelTableNotAcrossVersions: a store reopened as a new version
// over a changed level answers from its own data, not the old version's
// table in the shared cache.
func TestLevelTableNotAcrossVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	open := func(seed uint64) storage.Store {
		st, err := synth.Streamlines(ctx, 30_000, seed)
		if err != nil {
			t.Fatal(err)
		}
		return storage.Sub(st, "streamlines")
	}
	c := cache.New(256 << 20)
	old, err := zvf.OpenGen(ctx, open(7), zvf.Options{Name: "lines", Cache: c}, 1)
	if err != nil {
		t.Fatal(err)
	}
	whole := zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Connectivity: true, Wire: true}
	lo, _ := old.Level(1)
	for range 2 {
		tableAnswer(t, lo, whole)
	}
	if zvf.TableAnswers(lo) == 0 || !zvf.TableCached(lo) {
		t.Fatal("the old version answered without its table")
	}
	// The same name on the same cache, other data: a reopen after the
	// store's files changed (the next generation).
	next := open(8)
	s, err := zvf.OpenGen(ctx, next, zvf.Options{Name: "lines", Cache: c}, 2)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := zvf.Open(ctx, next, zvf.Options{Name: "fresh", Cache: cache.New(256 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	zvf.WithoutLevelTables(ref)
	ln, _ := s.Level(1)
	lr, _ := ref.Level(1)
	want, _ := tableAnswer(t, lr, whole)
	for i := range 3 {
		if got, _ := tableAnswer(t, ln, whole); !bytes.Equal(got, want) {
			t.Fatalf("answer %d of the new version is not its data's", i)
		}
	}
	if zvf.TableAnswers(ln) == 0 {
		t.Fatal("the new version answered without a table of its own")
	}
}

// TestLevelTableOneBuild: requests that all find a level's table missing
// at once, over slow storage, share one build and give one answer.
func TestLevelTableOneBuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := synth.Streamlines(ctx, 30_000, 7)
	if err != nil {
		t.Fatal(err)
	}
	slow := faultstore.New(storage.Sub(st, "streamlines"), nil)
	s, err := zvf.Open(ctx, slow, zvf.Options{Name: "lines", Cache: cache.New(256 << 20), Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := s.Level(1)
	// A level's first answer, of one chunk's cell, reads only that chunk.
	min, max := firstCell(l)
	tableAnswer(t, l, zvf.BBoxQuery{Min: min, Max: max, Connectivity: true, Wire: true})
	slow.Add(&faultstore.Rule{Fault: faultstore.Fault{Delay: 2 * time.Millisecond}})
	whole := zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Connectivity: true, Wire: true}
	const n = 6
	got, errs := make([][]byte, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { got[i], _, errs[i] = answerOf(l, whole) })
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || !bytes.Equal(got[i], got[0]) {
			t.Fatalf("answer %d differs (%v)", i, errs[i])
		}
	}
	if b, a := zvf.TableBuilds(l), zvf.TableAnswers(l); b != 1 || a != n {
		t.Fatalf("%d builds, %d answers from the table; want 1 and %d", b, a, n)
	}
}

// TestLevelTableRetiredNotRebuilt: requests still running on a store
// version whose cache entries were retired (a newer version opened) do
// not rebuild its level table, reading the whole level, one each.
func TestLevelTableRetiredNotRebuilt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := synth.Streamlines(ctx, 30_000, 7)
	if err != nil {
		t.Fatal(err)
	}
	c := cache.New(256 << 20)
	s, err := zvf.OpenGen(ctx, storage.Sub(st, "streamlines"), zvf.Options{Name: "lines", Cache: c}, 1)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := s.Level(1)
	min, max := firstCell(l)
	want, _ := tableAnswer(t, l, zvf.BBoxQuery{Min: min, Max: max, Connectivity: true, Wire: true}) // reads one chunk
	c.Retire("lines\x001\x00")
	for i := range 4 {
		if got, _ := tableAnswer(t, l, zvf.BBoxQuery{Min: min, Max: max, Connectivity: true, Wire: true}); !bytes.Equal(got, want) {
			t.Fatalf("answer %d after the retirement differs", i)
		}
	}
	if b := zvf.TableBuilds(l); b > 1 {
		t.Fatalf("%d builds of a retired version's table", b)
	}
}

// TestLevelTableOnlyForSmallChunks: by default only a level of small
// chunks (at most tableRowsPerChunk rows a chunk on average) answers
// from a table: on larger chunks the per-chunk path, which copies a
// covered chunk's prepared edges whole, was faster (a 50k streamline box
// at the bench's level 0: 775–793 µs from the table, 553–576 without).
func TestLevelTableOnlyForSmallChunks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := zvf.Open(ctx, tableStores(t)["streamlines07"](), zvf.Options{Name: "s", Cache: cache.New(256 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	small, large := 0, 0
	for _, n := range s.Levels() {
		l, _ := s.Level(n)
		info := l.Info()
		b := s.Info().Bounds
		q := zvf.BBoxQuery{Min: b[0], Max: b[1], Connectivity: true, Wire: true}
		for range 2 { // the first answer of a level reads only its box
			tableAnswer(t, l, q)
		}
		perChunk := float64(info.VertexCount) / float64(info.ChunkCount)
		switch answered := zvf.TableAnswers(l) > 0; {
		case perChunk <= 64 && !answered:
			t.Errorf("level %d (%.1f rows a chunk) did not answer from a table", n, perChunk)
		case perChunk > 64 && answered:
			t.Errorf("level %d (%.1f rows a chunk) answered from a table", n, perChunk)
		case perChunk <= 64:
			small++
		default:
			large++
		}
	}
	if small == 0 || large == 0 {
		t.Fatalf("levels of small chunks %d, of large %d: the store no longer has both", small, large)
	}
}

// firstCell is the grid cell of l's first chunk (3 axes).
func firstCell(l *zvf.Level) (min, max []float64) {
	first, cs := l.Keys()[0], l.Info().ChunkShape
	min, max = make([]float64, 3), make([]float64, 3)
	for d := range 3 {
		min[d], max[d] = float64(first[d])*cs[d], float64(first[d]+1)*cs[d]
	}
	return min, max
}
