package zvf

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// TestFitsFromSums: the level choice from seenSums is the pass's over
// random boxes and budgets around their counts, on levels wholly seen and
// partly seen (chunks forgotten, so the sums must leave them to the
// pass), and a warm choice that the sums decide scans no chunk.
func TestFitsFromSums(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := synth.PointsChunked(ctx, 30_000, 7, writer.CodecNone, 125)
	if err != nil {
		t.Fatal(err)
	}
	s := openPoints(t, st, 256<<20)
	everything := BBoxQuery{Min: []float64{-1e6, -1e6, -1e6}, Max: []float64{1e6, 1e6, 1e6}}
	rng := rand.New(rand.NewPCG(1, 2))
	sc := &bboxScratch{}
	decided := 0
	for _, n := range s.Levels() {
		l, err := s.Level(n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.BBox(ctx, everything, func(*Batch) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if l.seenSumsFor() == nil {
			t.Fatalf("level %d: no sums", n)
		}
		for round := range 300 {
			if round == 150 { // forget some chunks: the pass peeks them again
				for i := range l.seen {
					if rng.IntN(4) == 0 {
						l.seen[i].Store(0)
					}
				}
				l.seenGen.Add(1)
			}
			var lo, hi [3]float64
			for a := range 3 {
				x, y := rng.Float64()*1100-50, rng.Float64()*1100-50
				lo[a], hi[a] = min(x, y), max(x, y)
			}
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
			for _, stop := range []float64{-1, 0, c - 1, c, c + 1, c / 2, 2 * c, float64(rng.IntN(30_000))} {
				want := l.fitsByPass(sc, lo[:], hi[:], stop)
				before := sc.choiceScans
				got := l.fitsInBox(sc, lo[:], hi[:], stop)
				if got != want {
					t.Fatalf("level %d box %v–%v stop %v: %v, the pass says %v", n, lo, hi, stop, got, want)
				}
				if sc.choiceScans == before {
					decided++
				}
			}
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
	st, err := synth.PointsChunked(ctx, 30_000, 7, writer.CodecNone, 125)
	if err != nil {
		t.Fatal(err)
	}
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
