package zvf

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest/benchtest"
)

// uniformBinned is a chunk of key of binLevel's level holding perBin
// uniform rows in each of its 125 bins, in bin order (as a writer files
// them), from seed.
func uniformBinned(l *Level, key Key, perBin int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 3))
	var data []byte
	lo, hi := make([]float64, 3), make([]float64, 3)
	for f := 0; f < 125; f++ {
		l.binBox(key, f, lo, hi)
		for range perBin {
			var v [3]float32
			for a := range 3 {
				v[a] = float32(lo[a] + r.Float64()*(hi[a]-lo[a]))
			}
			data = append(data, row(v[0], v[1], v[2])...)
		}
	}
	return data
}

// TestMatchCountTested: the count of rows tested is the rows of the bins
// a box cuts (those it covers are taken, those it misses skipped), and
// matching finds, and copies, what a test of every row finds, in row
// order — on chunks of many rows a bin, the kind the load bench reads.
func TestMatchCountTested(t *testing.T) {
	l := binLevel(t, "float32")
	key := Key{1, 2, 0} // x 250…500, y 500…750, z 0…250 (bins of 50)
	for _, perBin := range []int{40, 70} {
		data := uniformBinned(l, key, perBin, uint64(perBin))
		cv := &chunkVerts{data: data, rows: len(data) / 12}
		if !l.deriveBins(key, cv) {
			t.Fatal("bins not derived")
		}
		for _, box := range [][2][3]float64{
			{{301, 501, 1}, {400.4, 1e9, 1e9}},     // faces a unit into a bin, a sliver of one
			{{299.6, 549.7, 10}, {400.4, 650, 30}}, // slivers, an axis cut twice in a bin
			{{275, 525, 25}, {475, 725, 225}},      // every face mid-bin
			{{260, 510, 10}, {262, 512, 12}},       // inside one bin
			{{200, 400, -100}, {600, 800, 300}},    // the whole chunk
			{{600, 400, -100}, {700, 800, 300}},    // none of it
		} {
			min, max := box[0][:], box[1][:]
			want := appendMatches(nil, data, l.vdt, 3, 0, cv.rows, min, max)
			var cnt matchCount
			m := chunkMatch{copy: true, cnt: &cnt}
			l.matchVerts(key, cv, min, max, &m)
			got := make([]int32, m.count())
			for i := range got {
				got[i] = int32(m.row(i))
			}
			if !slices.Equal(got, want) || !m.all && !slices.Equal(m.vdata, gather(nil, data, want, 12)) {
				t.Fatalf("%d a bin, box %v: rows %v, a test of every row finds %v", perBin, box, got, want)
			}
			cutRows := 0
			if sp, ok := l.boxBins(key, min, max, l.faceFree(key, cv)); ok && !m.all {
				for x := sp.first[0]; x <= sp.last[0]; x++ {
					for y := sp.first[1]; y <= sp.last[1]; y++ {
						for z := sp.first[2]; z <= sp.last[2]; z++ {
							if !sp.covers[0][x] || !sp.covers[1][y] || !sp.covers[2][z] {
								cutRows += perBin
							}
						}
					}
				}
			}
			if cnt.tested != cutRows {
				t.Errorf("%d a bin, box %v: %d rows tested, the cut bins hold %d", perBin, box, cnt.tested, cutRows)
			}
		}
	}
}

// FuzzMatchManyABin: for any rows of a chunk in bin order and any box,
// the rows found are those a test of every row finds, in the same order,
// with the same bytes, in chunks whose bins hold many rows (each input
// row repeated in place: long runs kept or dropped, NaN among them), as
// FuzzDeriveBins's few rows a bin rarely are.
func FuzzMatchManyABin(f *testing.F) {
	f.Add(slices.Concat(row(260, 510, 10), row(261, 511, 11), row(260, 510, 10)), uint8(20), 260.0, 500.0, 0.0, 260.5, 600.0, 40.0)
	f.Add(slices.Concat(row(300, 550, 50), row(300, 550, 50), row(310, 560, 60)), uint8(70), 300.0, 550.0, 50.0, 305.0, 555.0, 55.0)
	f.Add(slices.Concat(row(260, 510, 10), row(299, 549, 49)), uint8(9), 270.0, 520.0, 20.0, 1e9, 1e9, 1e9)
	f.Fuzz(func(t *testing.T, data []byte, repeat uint8, x0, y0, z0, x1, y1, z1 float64) {
		data = data[:len(data)/12*12]
		if len(data) > 12*16 {
			data = data[:12*16]
		}
		// Each row repeated in place: bins of many rows, ties in rank.
		var rows []byte
		for r := 0; r < len(data)/12; r++ {
			for range int(repeat%80) + 1 {
				rows = append(rows, data[12*r:12*r+12]...)
			}
		}
		l := binLevel(t, "float32")
		key := Key{1, 2, 0}
		cv := &chunkVerts{data: rows, rows: len(rows) / 12}
		if !l.deriveBins(key, cv) {
			return
		}
		min, max := []float64{x0, y0, z0}, []float64{x1, y1, z1}
		want := appendMatches(nil, rows, l.vdt, 3, 0, cv.rows, min, max)
		for _, copy := range []bool{false, true} {
			m := chunkMatch{copy: copy}
			l.matchVerts(key, cv, min, max, &m)
			got := make([]int32, m.count())
			for i := range got {
				got[i] = int32(m.row(i))
			}
			if !slices.Equal(got, want) || copy && !m.all && !slices.Equal(m.vdata, gather(nil, rows, want, 12)) {
				t.Fatalf("copy %v, box %v %v: rows %v, a test of every row finds %v", copy, min, max, got, want)
			}
		}
	})
}

// BenchmarkRowsTested reports what matching the load bench's boxes costs
// on its store (2,000,000 uniform points, chunks 125, bins 25), level 0,
// warm: rows tested one by one and rows answered (deterministic counts),
// and the CPU a match of them costs (the chunks' rows found and copied,
// as a binary answer's are; no HTTP, no encoding).
func BenchmarkRowsTested(b *testing.B) {
	ctx := context.Background()
	st, err := synth.Points(ctx, 2_000_000, 1, writer.CodecNone)
	if err != nil {
		b.Fatal(err)
	}
	s, err := Open(ctx, storage.Sub(st, "points"), Options{Name: "points", Cache: cache.New(2 << 30)})
	if err != nil {
		b.Fatal(err)
	}
	l, err := s.Level(0)
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range []struct {
		want int
		off  float64
	}{{50_000, 301}, {50_000, 308}, {50_000, 315}, {50_000, 322}, {500_000, 50}, {500_000, 57}, {500_000, 64}, {500_000, 71}, {1_000, 101}} {
		min, max := synth.BoxFor(2_000_000, q.want, q.off)
		b.Run(fmt.Sprintf("%d@%g", q.want, q.off), func(b *testing.B) {
			var cnt matchCount
			m := chunkMatch{copy: true, cnt: &cnt}
			cand := l.candidates(nil, min, max)
			rows := 0
			benchtest.Loop(b, func() { // the first call reads the chunks
				cnt, rows = matchCount{}, 0
				for _, i := range cand {
					cv, err := l.verticesAt(ctx, i)
					if err != nil {
						b.Fatal(err)
					}
					l.matchVerts(l.keys[i], cv, min, max, &m)
					rows += m.count()
				}
			})
			b.ReportMetric(float64(cnt.tested), "tested")
			b.ReportMetric(float64(rows), "rows")
		})
	}
}
