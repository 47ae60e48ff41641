package zvf

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zarr"
)

// binLevel is a bin-prefiltered 3-D level of float32 vertices: chunks of
// 250, bins of 50 (5 a chunk per axis), as the points_bins fixture.
func binLevel(t testing.TB, dtype string) *Level {
	dt, err := zarr.ParseDataType(dtype)
	if err != nil {
		t.Fatal(err)
	}
	return &Level{s: &Store{dims: 3}, keyArity: 3, vdt: dt, chunkShape: []float64{250, 250, 250},
		binShape: []float64{50, 50, 50}, bpc: []int64{5, 5, 5}, binPrefilter: true}
}

// row is one float32 vertex row's bytes.
func row(x, y, z float32) []byte {
	b := make([]byte, 12)
	binary.LittleEndian.PutUint32(b, math.Float32bits(x))
	binary.LittleEndian.PutUint32(b[4:], math.Float32bits(y))
	binary.LittleEndian.PutUint32(b[8:], math.Float32bits(z))
	return b
}

// FuzzDeriveBins: for any rows of chunk 1.2.0, bins found from the rows
// say exactly what matching needs — each bin's rows lie in its closed
// cell, bins follow one another through every row — and so matching a
// box from them finds what a test of every row finds, in the same order;
// rows that cannot be told (outside the chunk, out of bin order) are
// refused, never misplaced.
func FuzzDeriveBins(f *testing.F) {
	f.Add(slices.Concat(row(260, 510, 10), row(260, 510, 60), row(300, 560, 10)), 240.0, 500.0, 0.0, 320.0, 540.0, 40.0)
	f.Add(slices.Concat(row(300, 550, 50), row(300, 550, 100), row(500, 750, 250)), 300.0, 550.0, 50.0, 300.0, 550.0, 50.0)              // on faces
	f.Add(slices.Concat(row(260, 510, 10), row(300, 510, 10), row(300, 549, 49), row(310, 560, 60)), 300.0, 0.0, 0.0, 1e9, 1e9, 1e9)     // a box touching bins at their faces
	f.Add(slices.Concat(row(260, 510, 10), row(299, 510, 10), row(301, 549, 49), row(310, 560, 60)), 300.0, 550.0, 0.0, 400.0, 1e9, 1e9) // touching, no row on a face
	f.Add(slices.Concat(row(260, 510, 60), row(260, 510, 10)), 0.0, 0.0, 0.0, 1e9, 1e9, 1e9)                                             // out of order
	f.Add(slices.Concat(row(260, 510, 10), row(249, 510, 10)), 0.0, 0.0, 0.0, 1e9, 1e9, 1e9)                                             // outside the chunk
	f.Add(row(float32(math.NaN()), 510, 10), 0.0, 0.0, 0.0, 1e9, 1e9, 1e9)
	f.Add([]byte{}, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0)
	f.Fuzz(func(t *testing.T, data []byte, x0, y0, z0, x1, y1, z1 float64) {
		data = data[:len(data)/12*12]
		l := binLevel(t, "float32")
		key := Key{1, 2, 0}
		cv := &chunkVerts{data: data, rows: len(data) / 12}
		if !l.deriveBins(key, cv) {
			if cv.bins != nil {
				t.Fatal("refused, yet bins set")
			}
			return
		}
		if len(cv.bins) != 126 || cv.bins[0] != 0 || cv.bins[125] != int32(cv.rows) {
			t.Fatalf("bins %v for %d rows", cv.bins, cv.rows)
		}
		lo, hi := make([]float64, 3), make([]float64, 3)
		for b := 0; b < 125; b++ {
			if cv.bins[b] > cv.bins[b+1] {
				t.Fatalf("bin %d starts after the next: %v", b, cv.bins)
			}
			l.binBox(key, b, lo, hi)
			if !l.rowsWithin(cv.data, lo, hi, int(cv.bins[b]), int(cv.bins[b+1])) {
				t.Fatalf("bin %d holds a row outside its cell", b)
			}
		}
		if want := l.rowsWithin(cv.data, []float64{250, 500, 0}, []float64{500, 750, 250}, 0, cv.rows); cv.inCell != want {
			t.Fatalf("inCell %v, every row tested says %v", cv.inCell, want)
		}
		// The same pass found whether a row lies on a face of its bin's
		// cell, as a pass of its own over the rows would.
		wantFaces := int32(facesTouched)
		if l.findFaceFree(key, cv) {
			wantFaces = facesFree
		}
		if got := cv.faces.Load(); got != wantFaces {
			t.Fatalf("faces %d after deriving the bins, a pass over the rows finds %d", got, wantFaces)
		}
		box := [2][]float64{{x0, y0, z0}, {x1, y1, z1}}
		var m chunkMatch
		l.matchVerts(key, cv, box[0], box[1], &m)
		got := make([]int32, m.count())
		for i := range got {
			got[i] = int32(m.row(i))
		}
		want := appendMatches(nil, data, l.vdt, 3, 0, cv.rows, box[0], box[1])
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("box %v: rows %v, a test of every row finds %v", box, got, want)
		}
		// Copying the rows as they are found (a point answer) copies
		// exactly those.
		mc := chunkMatch{copy: true}
		l.matchVerts(key, cv, box[0], box[1], &mc)
		if !mc.all && (len(mc.rows) != len(want) || len(want) > 0 && (!slices.Equal(mc.rows, want) || !slices.Equal(mc.vdata, gather(nil, data, want, 12)))) {
			t.Fatalf("box %v, copying: rows %v, bytes %x; a test of every row finds %v", box, mc.rows, mc.vdata, want)
		}
	})
}

// BenchmarkDeriveBins: one pass over a chunk of 4,000 rows in bin order,
// what a cold chunk costs to learn its bins (against markContainment's
// two passes over the rows and the fragment index read it replaces), and
// whether a row lies on a bin face, which the first box to match it asks.
func BenchmarkDeriveBins(b *testing.B) {
	l := binLevel(b, "float32")
	key := Key{1, 2, 0}
	var data []byte
	for f := 0; f < 125; f++ {
		for k := 0; k < 32; k++ {
			x := 250 + float64(f/25)*50 + float64(k%4)*12 + 1
			y := 500 + float64(f/5%5)*50 + float64(k/4%4)*12 + 1
			z := float64(f%5)*50 + float64(k/16)*24 + 1
			for _, v := range []float64{x, y, z} {
				data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(v)))
			}
		}
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		cv := &chunkVerts{data: data, rows: len(data) / 12}
		if !l.deriveBins(key, cv) || !cv.inCell || !l.faceFree(key, cv) {
			b.Fatal("bins not derived")
		}
	}
}

// TestDeriveBinsFindsFaces: the pass that finds a cold chunk's bins also
// finds whether a row lies on a face of its bin's cell (on each axis, on
// either face, in a chunk's first bin or a later one), so no box makes a
// second pass over the rows to ask.
func TestDeriveBinsFindsFaces(t *testing.T) {
	l := binLevel(t, "float32")
	key := Key{1, 2, 0} // x 250…500 (bins of 50), y 500…750, z 0…250
	for _, tc := range []struct {
		name string
		rows [][]byte
		free bool
	}{
		{"inside", [][]byte{row(260, 510, 10), row(299.5, 549, 10), row(310, 560, 60)}, true},
		{"low x face, first row", [][]byte{row(250, 510, 10), row(260, 510, 20)}, false},
		{"high z face, a later row of the bin", [][]byte{row(260, 510, 10), row(260, 510, 50)}, false},
		{"high y face, a later bin", [][]byte{row(260, 510, 10), row(310, 600, 60)}, false},
		{"low y face, a row after a bin's first", [][]byte{row(310, 560, 60), row(320, 550, 70)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := slices.Concat(tc.rows...)
			cv := &chunkVerts{data: data, rows: len(data) / 12}
			if !l.deriveBins(key, cv) {
				t.Fatal("bins not derived")
			}
			want := int32(facesTouched)
			if tc.free {
				want = facesFree
			}
			if got := cv.faces.Load(); got != want {
				t.Fatalf("faces %d, want %d", got, want)
			}
			if got := l.faceFree(key, cv); got != tc.free || l.findFaceFree(key, cv) != tc.free {
				t.Fatalf("faceFree %v, want %v", got, tc.free)
			}
		})
	}
}

// TestTouchingBinsSkipped: a box whose faces lie on bin faces (a tile
// grid's) visits only the bins it overlaps with some thickness when no
// row lies on a bin face, not the layer of bins beyond each face that
// it only touches (whose rows it tested to keep none); with a row on a
// face it visits them, and keeps that row. Either way it finds what a
// test of every row finds.
func TestTouchingBinsSkipped(t *testing.T) {
	key := Key{1, 2, 0} // x 250…500 (bins of 50), y 500…750, z 0…250
	min, max := []float64{300, 550, 0}, []float64{400, 650, 250}
	for _, tc := range []struct {
		name       string
		rows       [][]byte
		free       bool
		xBins      [2]int64 // the bins visited along x (1: 300…350)
		yBins      [2]int64
		wantInside int
	}{
		{"no row on a face", [][]byte{row(260, 510, 10), row(299.5, 549, 10), row(310, 560, 60), row(399, 640, 60), row(401, 660, 60)}, true, [2]int64{1, 2}, [2]int64{1, 2}, 2},
		{"a row on a face", [][]byte{row(260, 510, 10), row(299.5, 549, 10), row(300, 560, 60), row(310, 560, 60), row(401, 660, 60)}, false, [2]int64{0, 3}, [2]int64{0, 3}, 2},
		{"a row on the box's face, in the bin beyond", [][]byte{row(260, 510, 10), row(310, 560, 60), row(400, 650, 60), row(401, 660, 60)}, false, [2]int64{0, 3}, [2]int64{0, 3}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := binLevel(t, "float32")
			data := slices.Concat(tc.rows...)
			cv := &chunkVerts{data: data, rows: len(tc.rows)}
			if !l.deriveBins(key, cv) {
				t.Fatal("bins not derived")
			}
			if got := l.faceFree(key, cv); got != tc.free {
				t.Fatalf("faceFree %v, want %v", got, tc.free)
			}
			sp, ok := l.boxBins(key, min, max, l.faceFree(key, cv))
			if !ok || [2]int64{sp.first[0], sp.last[0]} != tc.xBins || [2]int64{sp.first[1], sp.last[1]} != tc.yBins {
				t.Fatalf("bins x %d…%d, y %d…%d (%v); want x %v, y %v", sp.first[0], sp.last[0], sp.first[1], sp.last[1], ok, tc.xBins, tc.yBins)
			}
			want := appendMatches(nil, data, l.vdt, 3, 0, cv.rows, min, max)
			if len(want) != tc.wantInside {
				t.Fatalf("the test's rows: %d inside, want %d", len(want), tc.wantInside)
			}
			for _, copy := range []bool{false, true} {
				m := chunkMatch{copy: copy}
				l.matchVerts(key, cv, min, max, &m)
				if !slices.Equal(m.rows, want) || copy && !slices.Equal(m.vdata, gather(nil, data, want, 12)) {
					t.Fatalf("copy %v: rows %v, a test of every row finds %v", copy, m.rows, want)
				}
			}
		})
	}
}

// TestSameBin3Steps: with vector steps, the first row not strictly inside
// a bin's box is the one a test a row at a time finds, whichever of its
// axes leaves the box, on which side, at any place in a step or after
// whole steps; for bounds a float32 cannot hold (compared in float32, the
// steps round them outward exactly); and for NaN, infinities and zeros.
func TestSameBin3Steps(t *testing.T) {
	type bounds struct{ lo, hi [3]float64 }
	for _, tc := range []struct {
		name string
		b    bounds
		bad  [3]float64 // the value put at one axis of one row
		in   bool       // which lies inside the box after all
	}{
		{"on lo", bounds{[3]float64{0, 0, 0}, [3]float64{10, 10, 10}}, [3]float64{0, 0, 0}, false},
		{"on hi", bounds{[3]float64{0, 0, 0}, [3]float64{10, 10, 10}}, [3]float64{10, 10, 10}, false},
		{"past hi", bounds{[3]float64{0, 0, 0}, [3]float64{10, 10, 10}}, [3]float64{11, 12, 13}, false},
		// 0.3 is no float32: float32(0.3) lies just above it, outside a
		// box to 0.3; the float32 just below float32(0.1) lies below 0.1.
		{"just above hi", bounds{[3]float64{0.1, 0.1, 0.1}, [3]float64{0.3, 0.3, 0.3}}, [3]float64{float64(float32(0.3)), float64(float32(0.3)), float64(float32(0.3))}, false},
		// And float32(0.1) lies inside a box from 0.1, float32(9.9) (just
		// below 9.9) inside one to 9.9: rounded to the nearest float32,
		// the bounds would leave them out.
		{"float32 above lo", bounds{[3]float64{0.1, 0.1, 0.1}, [3]float64{9.9, 9.9, 9.9}}, [3]float64{float64(float32(0.1)), float64(float32(0.1)), float64(float32(0.1))}, true},
		{"float32 below hi", bounds{[3]float64{0.1, 0.1, 0.1}, [3]float64{9.9, 9.9, 9.9}}, [3]float64{float64(float32(9.9)), float64(float32(9.9)), float64(float32(9.9))}, true},
		{"just below lo", bounds{[3]float64{0.1, 0.1, 0.1}, [3]float64{0.3, 0.3, 0.3}}, [3]float64{float64(math.Nextafter32(float32(0.1), 0)), float64(math.Nextafter32(float32(0.1), 0)), float64(math.Nextafter32(float32(0.1), 0))}, false},
		{"NaN", bounds{[3]float64{0, 0, 0}, [3]float64{10, 10, 10}}, [3]float64{math.NaN(), math.NaN(), math.NaN()}, false},
		{"+Inf", bounds{[3]float64{0, 0, 0}, [3]float64{10, 10, 10}}, [3]float64{math.Inf(1), math.Inf(1), math.Inf(1)}, false},
		{"-Inf in a box past float32", bounds{[3]float64{-1e39, -1e39, -1e39}, [3]float64{1e39, 1e39, 1e39}}, [3]float64{math.Inf(-1), math.Inf(-1), math.Inf(-1)}, false},
		{"-0 on lo 0", bounds{[3]float64{0, 0, 0}, [3]float64{10, 10, 10}}, [3]float64{math.Copysign(0, -1), math.Copysign(0, -1), math.Copysign(0, -1)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const rows = 41 // five steps and a tail
			for at := 0; at <= rows; at++ {
				for axis := 0; axis < 3; axis++ {
					data := make([]byte, 0, 12*rows)
					for r := 0; r < rows; r++ {
						v := [3]float64{}
						for a := range v {
							v[a] = (tc.b.lo[a] + tc.b.hi[a]) / 2
							if math.IsInf(v[a], 0) || math.Abs(v[a]) > 1e30 || v[a] == 0 && tc.b.lo[a] < -1e30 {
								v[a] = 1
							}
						}
						if r == at {
							v[axis] = tc.bad[axis]
						}
						data = append(data, row(float32(v[0]), float32(v[1]), float32(v[2]))...)
					}
					lo, hi := tc.b.lo, tc.b.hi
					if simdRows(rowsBest) {
						// The steps stop exactly at the case's row, and pass
						// every row of a box's inside, on a bound a float32
						// cannot hold too.
						lohi := binBounds(lo[0], lo[1], lo[2], hi[0], hi[1], hi[2])
						want := rows / binStep * binStep
						if at < want && !tc.in {
							want = at
						}
						if got, _ := sameBinSIMD(data, &lohi); got != want {
							t.Fatalf("value at row %d, axis %d: the steps pass %d rows, not %d", at, axis, got, want)
						}
					}
					for from := 0; from < 3; from++ {
						want := sameBin3Go(data, from, rows, lo[0], lo[1], lo[2], hi[0], hi[1], hi[2])
						lohi := binBounds(lo[0], lo[1], lo[2], hi[0], hi[1], hi[2])
						got := sameBin3(data, from, rows, lo[0], lo[1], lo[2], hi[0], hi[1], hi[2], &lohi)
						if got != want {
							t.Fatalf("bad value at row %d, axis %d, from row %d: %d, a row at a time %d", at, axis, from, got, want)
						}
						stop := rows // the row the case's value stops a bin's run at
						if at < rows && at >= from && !tc.in {
							stop = at
						}
						if want != stop {
							t.Fatalf("value at row %d, axis %d: a row at a time stops at %d, not %d", at, axis, want, stop)
						}
					}
				}
			}
		})
	}
}

// FuzzSameBin3: any rows and bounds, the vector steps stop where a test
// a row at a time does.
func FuzzSameBin3(f *testing.F) {
	f.Add(slices.Repeat(row(1, 2, 3), 20), 0.0, 0.0, 0.0, 10.0, 10.0, 10.0, uint8(0))
	f.Add(slices.Concat(slices.Repeat(row(1, 2, 3), 19), row(1, 2, 10)), 0.0, 0.0, 0.0, 10.0, 10.0, 10.0, uint8(3))
	f.Add(slices.Repeat(row(float32(0.1), 2, 3), 33), 0.1, 0.0, 0.0, 10.0, 10.0, 10.0, uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, x0, y0, z0, x1, y1, z1 float64, from uint8) {
		n := len(data) / 12
		r := min(int(from), n)
		want := sameBin3Go(data, r, n, x0, y0, z0, x1, y1, z1)
		lohi := binBounds(x0, y0, z0, x1, y1, z1)
		if got := sameBin3(data, r, n, x0, y0, z0, x1, y1, z1, &lohi); got != want {
			t.Fatalf("from row %d of %d: %d, a row at a time %d", r, n, got, want)
		}
		if simdRows(rowsBest) {
			// The steps alone: exactly the first row not inside, or all
			// their rows.
			got, _ := sameBinSIMD(data[12*r:12*n], &lohi)
			if want := min(want-r, (n-r)/binStep*binStep); got != want {
				t.Fatalf("from row %d of %d: the steps pass %d rows, not %d", r, n, got, want)
			}
		}
	})
}
