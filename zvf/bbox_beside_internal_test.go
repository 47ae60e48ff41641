package zvf

import (
	"bytes"
	"context"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// TestBesideMatch: a warm box through dense chunks — every chunk cut, each
// of more than besideRows rows — has every other one matched by a reader
// beside the request's goroutine when there is a second core (on one,
// none; nor while other answers match beside on half the cores), and
// matching finds, and copies, what a test of every row finds, chunk by
// chunk in key order, however it was shared.
func TestBesideMatch(t *testing.T) {
	ctx := context.Background()
	const side, perChunk = 100.0, besideRows + 1000
	r := rand.New(rand.NewPCG(5, 5))
	pos := make([]float32, 3*8*perChunk)
	for i := range pos {
		pos[i] = float32(r.Float64() * side)
	}
	st, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.WritePoints(ctx, st, "points", &writer.PointCloud{Positions: pos},
		writer.Options{ChunkShape: []float64{side / 2, side / 2, side / 2}, BinShape: []float64{10, 10, 10}}); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, storage.Sub(st, "points"), Options{Name: "points", Cache: cache.New(1 << 28), Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := s.Level(0)
	for _, tc := range []struct {
		name     string
		min, max []float64
		copy     bool // rows copied as found (a point answer), or numbered
		bytes    bool // and not numbered (a binary answer)
		busy     bool // other answers match beside on half the cores
	}{
		{"binary", []float64{21, 22, 23}, []float64{77, 78, 79}, true, true, false},
		{"rows", []float64{21, 22, 23}, []float64{77, 78, 79}, false, false, false},
		{"copied rows", []float64{1.5, 20, 30}, []float64{99, 61, 62}, true, false, false},
		{"busy", []float64{21, 22, 23}, []float64{77, 78, 79}, true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := s.getScratch()
			defer s.putScratch(sc)
			sc.cand = l.candidates(sc.cand[:0], tc.min, tc.max)
			if len(sc.cand) != 8 {
				t.Fatalf("%d candidates, want 8", len(sc.cand))
			}
			for _, i := range sc.cand { // warm: every chunk cached
				if _, err := l.verticesAt(ctx, i); err != nil {
					t.Fatal(err)
				}
			}
			sc.copy, sc.bytesOnly = tc.copy, tc.bytes
			others := int32(0)
			if tc.busy {
				others = int32(max(1, runtime.GOMAXPROCS(0)/2))
			}
			s.beside.Store(others)
			ring, pos, beside := 4*s.conc, 0, 0
			err := l.matches(ctx, sc, sc.cand, tc.min, tc.max, func(m *chunkMatch) (bool, error) {
				if sc.slots[pos%ring].done != nil {
					beside++
				}
				i := sc.cand[pos]
				pos++
				if m.key.String() != l.keys[i].String() || m.cv.rows < besideRows {
					t.Fatalf("chunk %d: match of %v (%d rows), want %v", pos-1, m.key, m.cv.rows, l.keys[i])
				}
				want := appendMatches(nil, m.cv.data, l.vdt, 3, 0, m.cv.rows, tc.min, tc.max)
				if m.count() != len(want) {
					t.Fatalf("chunk %v: %d rows match, a test of every row finds %d", m.key, m.count(), len(want))
				}
				switch {
				case m.vdata != nil && m.vpos == nil:
					if !bytes.Equal(m.vdata, gather(nil, m.cv.data, want, 12)) {
						t.Fatalf("chunk %v: the copied rows differ", m.key)
					}
				case m.vdata == nil:
					for k, row := range want {
						if m.row(k) != int(row) {
							t.Fatalf("chunk %v: match %d is row %d, want %d", m.key, k, m.row(k), row)
						}
					}
				default:
					t.Fatalf("chunk %v: rows gathered from a selection", m.key)
				}
				return false, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			want := 4 * min(1, runtime.GOMAXPROCS(0)-1)
			if tc.busy {
				want = 0
			}
			if beside != want {
				t.Errorf("%d of 8 dense chunks matched beside, want %d (GOMAXPROCS %d)", beside, want, runtime.GOMAXPROCS(0))
			}
			if n := s.beside.Load(); n != others {
				t.Errorf("%d answers counted matching beside after the pass, want %d", n, others)
			}
		})
	}
}
