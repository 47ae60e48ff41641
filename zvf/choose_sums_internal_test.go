package zvf

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf/storage"

	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// TestFitsFromSums: the level choice from seenSums is the pass's over
// random boxes and budgets around their counts, on levels never read,
// partly read, wholly seen and partly forgotten (so the sums must leave
// them to the pass), and a warm choice that the sums decide scans no
// chunk.
func TestFitsFromSums(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := choicePoints(t)
	s := openPoints(t, st, 256<<20)
	everything := BBoxQuery{Min: []float64{-1e6, -1e6, -1e6}, Max: []float64{1e6, 1e6, 1e6}}
	rng := rand.New(rand.NewPCG(1, 2))
	sc := &bboxScratch{}
	decided := 0
	box := func() (lo, hi [3]float64) {
		for a := range 3 {
			x, y := rng.Float64()*1100-50, rng.Float64()*1100-50
			lo[a], hi[a] = min(x, y), max(x, y)
		}
		return lo, hi
	}
	// compare checks the choice against the pass for each stop.
	compare := func(l *Level, phase string, lo, hi [3]float64, stops ...float64) {
		t.Helper()
		for _, stop := range stops {
			want := l.fitsByPass(sc, lo[:], hi[:], stop)
			before := sc.choiceScans
			if got := l.fitsInBox(sc, lo[:], hi[:], stop); got != want {
				t.Fatalf("level %d %s, box %v–%v stop %v: %v, the pass says %v", l.n, phase, lo, hi, stop, got, want)
			}
			if sc.choiceScans == before {
				decided++
			}
		}
	}
	// estimate is the pass's estimate of the unseen chunks, as it sums it.
	estimate := func(l *Level, lo, hi [3]float64) float64 {
		mean, est := float64(l.meta.VertexCount)/float64(len(l.keys)), 0.0
		for _, i := range l.candidates(nil, lo[:], hi[:]) {
			if l.seen[i].Load() == 0 {
				est += l.cellShare(i, lo[:], hi[:]) * mean
			}
		}
		return est
	}
	for _, n := range s.Levels() {
		l, err := s.Level(n)
		if err != nil {
			t.Fatal(err)
		}
		for range 150 {
			lo, hi := box()
			est := estimate(l, lo, hi)
			compare(l, "never read", lo, hi, -1, 0, est, math.Nextafter(est, 0), est*(1+1e-9), est-1, est+1, est/2, 2*est, float64(rng.IntN(30_000)))
		}
		for range 4 { // a few small boxes' chunks seen
			var lo, hi [3]float64
			for a := range 3 {
				lo[a] = rng.Float64() * 1000
				hi[a] = lo[a] + 60
			}
			if _, err := l.BBox(ctx, BBoxQuery{Min: lo[:], Max: hi[:]}, func(*Batch) error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
		for range 150 {
			lo, hi := box()
			est := estimate(l, lo, hi)
			compare(l, "partly read", lo, hi, -1, 0, est, est*0.99, est*0.9, est/2, 2*est, float64(rng.IntN(30_000)))
		}
		if _, err := l.BBox(ctx, everything, func(*Batch) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if l.seenSumsFor() == nil {
			t.Fatalf("level %d: no sums", n)
		}
		for round := range 300 {
			if round == 150 { // forget some chunks: the pass and the sums estimate them
				for i := range l.seen {
					if rng.IntN(4) == 0 {
						l.seen[i].Store(0)
					}
				}
				l.seenGen.Add(1)
			}
			lo, hi := box()
			if rng.IntN(8) == 0 { // on cell faces: covers' boundary cases
				for a := range 3 {
					lo[a], hi[a] = 125*float64(rng.IntN(4)), 125*float64(4+rng.IntN(5))
				}
			}
			res, err := l.BBox(ctx, BBoxQuery{Min: lo[:], Max: hi[:]}, func(*Batch) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			c := float64(res.Count)
			compare(l, "read", lo, hi, -1, 0, c-1, c, c+1, c/2, 2*c, float64(rng.IntN(30_000)))
		}
	}
	if decided == 0 {
		t.Fatal("the sums decided no choice")
	}
	t.Logf("%d choices decided by the sums", decided)
}

// TestWarmChoiceScansNoChunk: once a box's chunks are seen, choosing a
// level for it passes over none of them when the rows of its covered
// chunks alone pass the budget, or all of its rows stay within it.
func TestWarmChoiceScansNoChunk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := choicePoints(t)
	l := pointsLevel0(t, st, 256<<20)
	lo, hi := []float64{100, 100, 100}, []float64{700, 700, 700}
	res, err := l.BBox(ctx, BBoxQuery{Min: lo, Max: hi}, func(*Batch) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	sc := &bboxScratch{}
	for _, tc := range []struct {
		stop float64
		want bool
	}{{1, false}, {float64(res.Count) * 10, true}} {
		if got := l.fitsInBox(sc, lo, hi, tc.stop); got != tc.want {
			t.Errorf("stop %v: %v, want %v", tc.stop, got, tc.want)
		}
	}
	if sc.choiceScans != 0 {
		t.Errorf("%d passes over the candidates of a warm box", sc.choiceScans)
	}
}

// TestUnseenChoiceScansNoChunk: a level no answer has read yet (the finer
// levels of a viewer's level=auto, which it never asks for) is decided
// without a pass over the box's candidates, as the pass decides it,
// unless the pass's estimate lies within rounding of the budget; once a
// chunk of it has been read, the chunks the box covers still refuse it
// without a pass when they alone pass the budget.
func TestUnseenChoiceScansNoChunk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := choicePoints(t)
	l := pointsLevel0(t, st, 256<<20)
	lo, hi := []float64{100, 100, 100}, []float64{700, 700, 700} // covers the cells 125–625 on each axis: 64 chunks
	mean := float64(l.meta.VertexCount) / float64(len(l.keys))
	est := 0.0 // the pass's estimate, as it sums it
	for _, i := range l.candidates(nil, lo, hi) {
		est += l.cellShare(i, lo, hi) * mean
	}
	check := func(stop float64, want, pass bool) {
		t.Helper()
		sc := &bboxScratch{}
		if got := l.fitsInBox(sc, lo, hi, stop); got != want {
			t.Errorf("stop %v: %v, want %v", stop, got, want)
		}
		if got := l.fitsByPass(&bboxScratch{}, lo, hi, stop); got != want {
			t.Errorf("stop %v: the pass says %v", stop, got)
		}
		if scanned := sc.choiceScans != 0; scanned != pass {
			t.Errorf("stop %v: passed over the candidates %v, want %v", stop, scanned, pass)
		}
	}
	check(1, false, false)
	check(est/2, false, false)
	check(est*2, true, false)
	check(est, true, true) // within rounding: the pass's
	check(math.Nextafter(est, 0), false, true)
	for i := range l.seen {
		if l.seen[i].Load() != 0 {
			t.Fatalf("chunk %d seen: the choice read a chunk", i)
		}
	}
	// One chunk read: the covered chunks, 63 of them at the mean, refuse a
	// budget below them; a budget above them is the pass's.
	if _, err := l.BBox(ctx, BBoxQuery{Min: []float64{130, 130, 130}, Max: []float64{140, 140, 140}}, func(*Batch) error { return nil }); err != nil {
		t.Fatal(err)
	}
	check(60*mean, false, false)
	// And so do all the cells' shares at the mean, less one a seen chunk:
	// past what the covered chunks alone say.
	check(est*0.9, false, false)
	check(est*2, true, true)
}

// TestUnseenChoiceNegativeCount: a level whose metadata gives a negative
// vertex_count (a corrupt store) is chosen as the pass chooses it, read or
// not.
func TestUnseenChoiceNegativeCount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := choicePoints(t)
	l := pointsLevel0(t, st, 256<<20)
	l.meta.VertexCount = -l.meta.VertexCount
	rng := rand.New(rand.NewPCG(5, 6))
	sc := &bboxScratch{}
	for round := range 200 {
		if round == 100 {
			if _, err := l.BBox(ctx, BBoxQuery{Min: []float64{300, 300, 300}, Max: []float64{700, 700, 700}}, func(*Batch) error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
		var lo, hi [3]float64
		for a := range 3 {
			x, y := rng.Float64()*1100-50, rng.Float64()*1100-50
			lo[a], hi[a] = min(x, y), max(x, y)
		}
		for _, stop := range []float64{-1e9, -1, 0, 1, 5_000, 30_000} {
			if got, want := l.fitsInBox(sc, lo[:], hi[:], stop), l.fitsByPass(sc, lo[:], hi[:], stop); got != want {
				t.Fatalf("box %v–%v stop %v: %v, the pass says %v", lo, hi, stop, got, want)
			}
		}
	}
}

// TestUnseenChunksAreNotCached: what fitsByPass and unseenPass rely on —
// a chunk a level never noted as seen is not in the cache under its key
// — holds after every way of reading chunks: boxes with and without
// connectivity at every level, level=auto, chunk and object reads; on a
// bin-prefiltered point store and a streamline store.
func TestUnseenChunksAreNotCached(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pts := choicePoints(t)
	lines, err := synth.Streamlines(ctx, 20_000, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		s    *Store
	}{
		{"points", openPoints(t, pts, 256<<20)},
		{"streamlines", openLines(t, lines)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			for round := range 40 {
				var lo, hi [3]float64
				for a := range 3 {
					x, y := rng.Float64()*1100-50, rng.Float64()*1100-50
					lo[a], hi[a] = min(x, y), max(x, y)
				}
				levels := tc.s.Levels()
				n := levels[rng.IntN(len(levels))]
				if round%5 == 0 {
					if n, err = tc.s.ChooseLevel(ctx, lo[:], hi[:], 2_000, nil, Selection{}); err != nil {
						t.Fatal(err)
					}
				}
				l, err := tc.s.Level(n)
				if err != nil {
					t.Fatal(err)
				}
				q := BBoxQuery{Min: lo[:], Max: hi[:], Connectivity: round%2 == 0}
				if _, err := l.BBox(ctx, q, func(*Batch) error { return nil }); err != nil {
					t.Fatal(err)
				}
				if len(l.keys) > 0 {
					if _, err := l.Chunk(ctx, l.keys[rng.IntN(len(l.keys))], nil); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := l.Object(ctx, int64(rng.IntN(50)), nil); err != nil && !errors.Is(err, ErrNotFound) {
					t.Fatal(err)
				}
			}
			for _, n := range tc.s.Levels() {
				l, _ := tc.s.Level(n)
				for i := range l.keys {
					if l.seen[i].Load() != 0 {
						continue
					}
					hits := 0
					if _, ok := l.peekVertsTally(int32(i), &hits); ok {
						t.Fatalf("level %d chunk %v: cached, never noted as seen", n, l.keys[i])
					}
				}
			}
		})
	}
}

// openLines opens synth.Streamlines' store.
func openLines(tb testing.TB, st storage.Store) *Store {
	tb.Helper()
	s, err := Open(context.Background(), storage.Sub(st, "streamlines"), Options{Name: "streamlines", Cache: cache.New(256 << 20)})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// choicePoints is the level-choice tests' store: 30,000 points in chunks
// of 125 (8 a side), three levels.
func choicePoints(t *testing.T) storage.Store {
	t.Helper()
	st, err := synth.PointsChunked(context.Background(), 30_000, 7, writer.CodecNone, 125)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
