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
// FuzzDeriveBins's few rows a bin rarely are; and when only the rows'
// bytes are asked for, the same count and bytes.
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
		// Only the bytes (a binary answer of vertices): the same count
		// and bytes, no row numbered.
		m := chunkMatch{copy: true, bytesOnly: true, buf: make([]int32, 0, 8)}
		l.matchVerts(key, cv, min, max, &m)
		if m.count() != len(want) || !m.all && (!m.noRows || m.rows != nil || cap(m.buf) != 8 || !slices.Equal(m.vdata, gather(nil, rows, want, 12))) {
			t.Fatalf("bytes only, box %v %v: %d rows (noRows %v, rows %v), bytes %x; a test of every row finds %v", min, max, m.count(), m.noRows, m.rows, m.vdata, want)
		}
	})
}

// BenchmarkRowsTested reports what matching the load bench's boxes costs
// on its store (2,000,000 uniform points, chunks 125, bins 25), level 0,
// warm: rows tested one by one and rows answered (deterministic counts),
// and the CPU a match of them costs (the chunks' rows found and copied,
// as an answer's are; no HTTP, no encoding): numbered as a text answer's
// rows are, or only their bytes, as a binary answer of vertices takes.
func BenchmarkRowsTested(b *testing.B) {
	ctx := context.Background()
	st, err := synth.Points(ctx, 2_000_000, 1, writer.CodecNone)
	if err != nil {
		b.Fatal(err)
	}
	l := pointsLevel0(b, st, 2<<30)
	for _, q := range []struct {
		want int
		off  float64
	}{{50_000, 301}, {50_000, 308}, {50_000, 315}, {50_000, 322}, {500_000, 50}, {500_000, 57}, {500_000, 64}, {500_000, 71}, {1_000, 101}} {
		min, max := synth.BoxFor(2_000_000, q.want, q.off)
		for _, bytesOnly := range []bool{false, true} {
			name := fmt.Sprintf("%d@%g/numbered", q.want, q.off)
			if bytesOnly {
				name = fmt.Sprintf("%d@%g/bytes", q.want, q.off)
			}
			b.Run(name, func(b *testing.B) {
				var cnt matchCount
				m := chunkMatch{copy: true, bytesOnly: bytesOnly, cnt: &cnt}
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
}

// TestBytesOnlyAnswersSame: a binary answer of vertices (Wire, no
// attribute, id or filter), whose rows are not numbered, holds the same
// batches — chunks, first rows, counts, vertex bytes — and the same
// result (count, more, next page) as the answer that numbers them, for
// boxes across chunks and bins, whole, limited and offset.
func TestBytesOnlyAnswersSame(t *testing.T) {
	ctx := context.Background()
	st, err := synth.Points(ctx, 40_000, 5, writer.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	l := pointsLevel0(t, st, 64<<20)
	type batch struct {
		chunk        string
		first        int64
		rows         int
		verts        string
		rowsNumbered bool
	}
	answer := func(q BBoxQuery) ([]batch, BBoxResult) {
		var got []batch
		res, err := l.BBox(ctx, q, func(b *Batch) error {
			src := b.Source
			got = append(got, batch{b.Chunk.String(), b.First, b.Rows, string(b.Vertices.Data), src.rows != nil || src.all})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got, res
	}
	unnumbered := 0
	for _, box := range [][2][]float64{
		{{301, 301, 301}, {593.4, 593.4, 593.4}},
		{{0, 0, 0}, {1000, 1000, 1000}},
		{{110, 240, 255.5}, {130.2, 760, 262}},
		{{50, 50, 50}, {250, 250, 250}}, // faces on chunk and bin faces
	} {
		for _, page := range []struct{ offset, limit int64 }{{0, 0}, {0, 700}, {350, 900}} {
			q := BBoxQuery{Min: box[0], Max: box[1], Offset: page.offset, Limit: page.limit}
			want, wantRes := answer(q)
			q.Wire = true
			got, gotRes := answer(q)
			if len(got) != len(want) || gotRes.Count != wantRes.Count || gotRes.More != wantRes.More || (gotRes.Next == nil) != (wantRes.Next == nil) {
				t.Fatalf("box %v, page %+v: %d batches, %d rows, more %v; numbered: %d, %d, %v", box, page, len(got), gotRes.Count, gotRes.More, len(want), wantRes.Count, wantRes.More)
			}
			for i := range got {
				if got[i].chunk != want[i].chunk || got[i].first != want[i].first || got[i].rows != want[i].rows || got[i].verts != want[i].verts {
					t.Fatalf("box %v, page %+v, batch %d: %s first %d, %d rows; numbered: %s first %d, %d rows (or other bytes)", box, page, i, got[i].chunk, got[i].first, got[i].rows, want[i].chunk, want[i].first, want[i].rows)
				}
				if !got[i].rowsNumbered {
					unnumbered++
				}
			}
		}
	}
	if unnumbered == 0 {
		t.Fatal("no batch of a Wire answer went without row numbers: the test tests nothing")
	}
}

// openPoints opens the "points" store of st (as zvf/synth writes it) with a
// cache of budget bytes.
func openPoints(tb testing.TB, st storage.Store, budget int64) *Store {
	tb.Helper()
	s, err := Open(context.Background(), storage.Sub(st, "points"), Options{Name: "points", Cache: cache.New(budget)})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// pointsLevel0 is level 0 of openPoints' store.
func pointsLevel0(tb testing.TB, st storage.Store, budget int64) *Level {
	tb.Helper()
	l, err := openPoints(tb, st, budget).Level(0)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}
