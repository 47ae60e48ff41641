package zvf

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zarr"
	"github.com/zvfserve/zvfserve/zvf/zvftest/benchtest"
)

// FuzzBoxTest: every row kernel of boxTest (row numbers, numbers and
// bytes, bytes alone; on every axis, on one, on two) gives, row for row,
// the verdict of the plain float64 test of the axes it tests, for any row
// bits (NaN, ±Inf, -0, subnormals) and any box (bounds between float32
// values, beyond their range, infinite, around zero, empty), from any
// first row; the bits and key kernels (rowBits) and the float ones alike.
func FuzzBoxTest(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64}, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0, uint8(0))                               // a row on the box
	f.Add([]byte{205, 204, 204, 61, 0, 0, 0, 0, 0, 0, 0, 0}, 0.1, 0.0, 0.0, 0.1, 0.0, 0.0, uint8(0))                              // 0.1 is no float32
	f.Add([]byte{255, 255, 127, 127, 0, 0, 128, 127, 0, 0, 192, 127}, -1e300, -1e300, -1e300, 1e300, math.Inf(1), 1e39, uint8(0)) // max, +Inf, NaN
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 128, 0, 0, 128, 255}, 0.0, math.Inf(-1), math.Inf(-1), 1e-45, 0.0, 0.0, uint8(0))           // subnormal, -0, -Inf
	// Rows tested as bits: ranges above zero and below it, bounds
	// between float32 values, subnormal, infinite; -0, NaN of either
	// sign and rows of the other sign among the rows; a first row past 0.
	rows := slices.Concat(row(1, 2, 3), row(-1, -2, -3), row(float32(math.Copysign(0, -1)), 0, 1e-45),
		row(float32(math.NaN()), 2, 3), row(-float32(math.NaN()), -2, -3), row(float32(math.Inf(1)), float32(math.Inf(-1)), 0.1),
		row(1.5, 2.5, 3.5), row(-1e-45, -0.1, 3e38), row(0.1, 0.2, 0.3))
	f.Add(rows, 0.5, 1.0, 0.1, 2.0, 3.0, 4.0, uint8(2))
	f.Add(rows, -2.0, -3.0, -4.0, -0.5, -1.5, -1e-45, uint8(1))
	f.Add(rows, 1e-45, 0.1, 1e-46, math.Inf(1), 0.30000001, 3e38, uint8(0))
	f.Add(rows, math.Inf(-1), -0.1, -3.0, -1e-45, -0.1, -2.9999999, uint8(3))
	f.Add(rows, 0.0, -2.0, -1e-46, 2.0, 0.0, 4.0, uint8(0)) // ranges from zero, to zero, around it
	f.Add(rows, math.Copysign(0, -1), -1e-46, math.Inf(-1), 1e-46, math.Copysign(0, -1), math.Inf(1), uint8(1))
	f.Add(rows, -2.0, -3.0, -4.0, 2.0, 3.0, 4.0, uint8(0))        // around zero on every axis
	f.Add(rows, math.NaN(), -3.0, -4.0, 2.0, 3.0, 4.0, uint8(0))  // no row inside: a NaN bound,
	f.Add(rows, -2.0, -3.0, -4.0, 2.0, math.NaN(), 4.0, uint8(0)) // the other,
	f.Add(rows, -2.0, -3.0, 5.0, 2.0, 3.0, 4.0, uint8(0))         // min > max
	// Rows tested as keys (rowKey): bounds exactly -0 or +0, ranges from
	// and to zero, and rows of -0, +0 and their neighbours in every place
	// of a four-row step; -0 and +0 are inside together or not at all.
	nz := float32(math.Copysign(0, -1))
	zeros := slices.Concat(row(nz, 0, nz), row(0, nz, 0), row(1e-45, -1e-45, nz), row(-1e-45, 1e-45, 0),
		row(nz, nz, nz), row(0, 0, 0), row(float32(math.NaN()), nz, 0), row(-float32(math.NaN()), 0, nz),
		row(float32(math.Inf(1)), float32(math.Inf(-1)), nz), row(0.5, -0.5, 0))
	negZero := math.Copysign(0, -1)
	f.Add(zeros, negZero, negZero, negZero, 0.0, 0.0, 0.0, uint8(0))                // [-0, +0]: both zeros, nothing else
	f.Add(zeros, 0.0, 0.0, 0.0, negZero, negZero, negZero, uint8(0))                // [+0, -0]: the same
	f.Add(zeros, 0.0, negZero, 0.0, 1.0, 1.0, 1.0, uint8(0))                        // from zero up
	f.Add(zeros, -1.0, -1.0, -1.0, negZero, 0.0, negZero, uint8(1))                 // down to zero
	f.Add(zeros, -1e-45, -1e-46, math.Inf(-1), 1e-45, 1e-46, math.Inf(1), uint8(0)) // around zero, tightly
	dt, err := zarr.ParseDataType("float32")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, x0, y0, z0, x1, y1, z1 float64, first uint8) {
		checkBoxTest(t, dt, data, []float64{x0, y0, z0}, []float64{x1, y1, z1}, int(first), int(first)%4)
	})
}

// checkBoxTest is FuzzBoxTest's check of the rows of data (whole rows)
// from row first, held off bytes past a word (unaligned), on every path
// of the kernels: the fastest here (AVX-512 where the CPU has it), the
// AVX2 steps (where it has those) and the Go kernels alone.
func checkBoxTest(t *testing.T, dt zarr.DataType, data []byte, min, max []float64, first, off int) {
	t.Helper()
	data = unaligned(data[:len(data)/12*12], off)
	rows := len(data) / 12
	a := first
	if a > rows {
		a = rows
	}
	for _, goRows := range rowPaths {
		bt := newBoxTest(dt, 3, min, max)
		bt.goRows = goRows
		if got, want := bt.appendMatches(nil, data, a, rows, 7), appendMatches(nil, data, dt, 3, a, rows, min, max); !slices.Equal(got, want) {
			t.Fatalf("path %v, every axis: rows %v, float64 test %v", goRows, got, want)
		}
		inAxes := func(r int, axes uint8) bool { // the float64 test of a row on axes
			for i := range 3 {
				v := float64(math.Float32frombits(binary.LittleEndian.Uint32(data[12*r+4*i:])))
				if axes&(1<<i) != 0 && !(v >= min[i] && v <= max[i]) {
					return false
				}
			}
			return true
		}
		for axes := uint8(0); axes <= 7; axes++ {
			// A kernel may test more axes than asked (the caller knows
			// the rows hold on them): the rows it is given hold there.
			tested := axes
			if tested == 0 {
				tested = 7
			}
			sub := slices.Clone(data[:12*a])
			var want []int32
			for r := a; r < rows; r++ {
				if !inAxes(r, 7&^tested) {
					continue
				}
				if inAxes(r, tested) {
					want = append(want, int32(len(sub)/12))
				}
				sub = append(sub, data[12*r:12*r+12]...)
			}
			data, rows := unaligned(sub, off), len(sub)/12
			wantBytes := gather([]byte("pre"), data, want, 12)
			if got := bt.appendMatches([]int32{-1}, data, a, rows, axes); !slices.Equal(got[1:], want) {
				t.Fatalf("path %v, axes %03b: rows %v, float64 test %v", goRows, axes, got[1:], want)
			}
			if got, gotBytes := bt.appendMatchesCopy([]int32{-1}, []byte("pre"), data, a, rows, axes); !slices.Equal(got[1:], want) || !slices.Equal(gotBytes, wantBytes) {
				t.Fatalf("path %v, axes %03b: copying finds rows %v and bytes %x, float64 test %v", goRows, axes, got[1:], gotBytes, want)
			}
			if got := bt.appendCopy([]byte("pre"), data, a, rows, axes); !slices.Equal(got, wantBytes) {
				t.Fatalf("path %v, axes %03b: copying bytes alone finds %x, float64 test %x", goRows, axes, got, wantBytes)
			}
		}
	}
}

// rowPaths are the row kernels' paths checkBoxTest compares.
var rowPaths = []rowPath{rowsBest, rowsAVX2, rowsGo}

// unaligned is a copy of b starting off bytes into its allocation.
func unaligned(b []byte, off int) []byte {
	return append(make([]byte, off, off+len(b)), b...)[off:]
}

// TestRowKernels: FuzzBoxTest's check on rows of awkward values (NaN of
// either sign, ±Inf, ±0, subnormals, float32 neighbours of the bounds),
// 0 to 40 of them so every tail after the vector steps occurs, from
// several first rows and byte offsets, on boxes tested as bits (above
// zero, below it), as keys (around zero, from and to ±0) and as floats.
func TestRowKernels(t *testing.T) {
	dt, err := zarr.ParseDataType("float32")
	if err != nil {
		t.Fatal(err)
	}
	nz := math.Copysign(0, -1)
	boxes := []struct{ min, max []float64 }{
		{[]float64{0.5, 1, 0.25}, []float64{2, 3, 4}},
		{[]float64{-2, -3, -4}, []float64{-0.5, -1e-45, -0.25}},
		{[]float64{-2, -1, -3}, []float64{2, 0.5, 3}},
		{[]float64{nz, 0, nz}, []float64{1, 0, 1}},
		{[]float64{-1, -1, 0}, []float64{nz, 0, nz}},
		{[]float64{1e-45, math.Inf(-1), 1.5}, []float64{math.Inf(1), math.Inf(1), 1.5}},
		{[]float64{0.1, 0.2, 0.3}, []float64{0.30000001, 0.7, 1e39}},
		{[]float64{3, 0, 0}, []float64{2, 1, 1}}, // empty: the float test
	}
	var pool []float32 // the values a row takes, around each box's bounds
	for _, v := range []float64{math.NaN(), -math.NaN(), math.Inf(1), math.Inf(-1), 0, nz, 1e-45, -1e-45, 0.1, 0.5, 1.5, -1, 2, 3, 4, -4} {
		pool = append(pool, float32(v))
	}
	for _, b := range boxes {
		for i := range 3 {
			lo, hi := f32Bounds(b.min[i], b.max[i])
			for _, v := range []float32{lo, hi} {
				pool = append(pool, v, math.Nextafter32(v, float32(math.Inf(1))), math.Nextafter32(v, float32(math.Inf(-1))))
			}
		}
	}
	seed := uint32(7)
	next := func() uint32 { seed = seed*1664525 + 1013904223; return seed >> 8 }
	for rows := 0; rows <= 40; rows++ {
		for _, b := range boxes {
			data := make([]byte, 12*rows)
			for i := 0; i < 3*rows; i++ {
				// Runs of rows wholly inside and outside among random
				// ones, so the steps kept and skipped whole occur too.
				v := pool[next()%uint32(len(pool))]
				switch i / 24 % 3 {
				case 1:
					v = float32(b.max[i%3])
				case 2:
					v = float32(math.NaN())
				}
				binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
			}
			first := int(next() % 3)
			checkBoxTest(t, dt, data, b.min, b.max, first, rows%4)
		}
	}
	// Every pattern of kept rows in a step (so every lane mask the
	// vector steps pack by), a row outside on one axis in turn, in two
	// steps and a tail, tested as bits and as keys.
	for m := range 256 {
		var data []byte
		for i := range 17 {
			in := [3]float32{1, 2, 3}
			if m>>(i%8)&1 == 0 {
				in[(i+m)%3] = 5
			}
			data = append(data, row(in[0], in[1], in[2])...)
		}
		checkBoxTest(t, dt, data, boxes[0].min, boxes[0].max, 0, m%4)
		checkBoxTest(t, dt, data, []float64{-2, -2, -4}, []float64{2, 3, 4}, 0, m%4)
	}
}

// BenchmarkAppendMatchesCopy: the cut bins' row kernels, rows tested on
// one axis (a bin on a face of the box) or on all three, with a share of
// them kept at random: each row copied as it is tested (copy), or the
// rows found and then those copied (find, what matchBinsInto does where
// the box overlaps a sixteenth of a bin or less); ns per row tested.
func BenchmarkAppendMatchesCopy(b *testing.B) {
	dt, err := zarr.ParseDataType("float32")
	if err != nil {
		b.Fatal(err)
	}
	const rows = 4096
	data := make([]byte, 12*rows)
	seed := uint32(1)
	for i := 0; i < 3*rows; i++ { // uniform in [0, 1)
		seed = seed*1664525 + 1013904223
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(seed>>8)/float32(1<<24)))
	}
	out, vout := make([]int32, 0, rows), make([]byte, 0, 12*rows)
	for _, tc := range []struct {
		name string
		kept float64 // the share of rows kept, on the first axis
		axes uint8
	}{{"one-axis-most", 0.96, 1}, {"one-axis-three-quarters", 0.74, 1}, {"one-axis-half", 0.5, 1}, {"one-axis-sixteenth", 1.0 / 16, 1}, {"one-axis-touching", 0, 1}, {"three-axes-half", 0.5, 7}} {
		bt := newBoxTest(dt, 3, []float64{1 - tc.kept, 0, 0}, []float64{1, 1, 1})
		b.Run(tc.name+"/copy", func(b *testing.B) {
			for b.Loop() {
				out, vout = bt.appendMatchesCopy(out[:0], vout[:0], data, 0, rows, tc.axes)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rows, "ns/row")
		})
		b.Run(tc.name+"/find", func(b *testing.B) {
			for b.Loop() {
				out = bt.appendMatches(out[:0], data, 0, rows, tc.axes)
				vout = gather(vout[:0], data, out, 12)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rows, "ns/row")
		})
	}
}

// BenchmarkBoxTestKernels: the cut bins' row kernels — bytes alone (a
// binary answer of vertices), numbers and bytes, numbers — on 4,096
// uniform rows, half of them kept, tested on one axis (a bin on a face of
// the box) or on three; the box's ranges above zero (tested as bits) or
// around it (tested as keys). CPU ns per row tested; "-go" the Go
// kernels where the vector steps would take the rows (simdRows), "-avx2"
// the AVX2 steps where the AVX-512 ones would (avx512Rows).
func BenchmarkBoxTestKernels(b *testing.B) {
	dt, err := zarr.ParseDataType("float32")
	if err != nil {
		b.Fatal(err)
	}
	const rows = 4096
	for _, at := range []struct {
		name string
		base float32 // rows uniform in [base, base+1)
	}{{"above-zero", 1}, {"around-zero", -0.5}} {
		data := make([]byte, 12*rows)
		seed := uint32(1)
		for i := 0; i < 3*rows; i++ {
			seed = seed*1664525 + 1013904223
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(at.base+float32(seed>>8)/float32(1<<24)))
		}
		lo, hi := float64(at.base), float64(at.base)+1
		out, vout := make([]int32, 0, rows), make([]byte, 0, 12*rows)
		for _, axes := range []uint8{1, 7} {
			name := at.name + "/one-axis"
			if axes == 7 {
				name = at.name + "/three-axes"
			}
			for _, goRows := range rowPaths {
				bt := newBoxTest(dt, 3, []float64{lo + 0.5, lo, lo}, []float64{hi, hi, hi})
				bt.goRows = goRows
				suffix := [...]string{rowsBest: "", rowsAVX2: "-avx2", rowsGo: "-go"}[goRows]
				for _, k := range []struct {
					name string
					run  func()
				}{
					{"bytes", func() { vout = bt.appendCopy(vout[:0], data, 0, rows, axes) }},
					{"numbered-bytes", func() { out, vout = bt.appendMatchesCopy(out[:0], vout[:0], data, 0, rows, axes) }},
					{"numbered", func() { out = bt.appendMatches(out[:0], data, 0, rows, axes) }},
				} {
					b.Run(name+"/"+k.name+suffix, func(b *testing.B) {
						cpu := benchtest.CPU(b) // and one call Loop makes first, to warm
						benchtest.Loop(b, k.run)
						b.ReportMetric(float64(benchtest.CPU(b)-cpu)/float64(b.N)/rows, "cpu-ns/row")
					})
				}
			}
		}
	}
}
