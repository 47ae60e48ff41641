package zvf

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zarr"
)

// FuzzBoxTest: the float32 comparisons of boxTest give, row for row, the
// verdict of the float64 test of every row (appendMatches), on every axis
// and on one axis alone, for any row bits (NaN, ±Inf, subnormals) and any
// box (bounds between float32 values, beyond their range, infinite); and
// copying rows as they are found copies exactly the rows found.
func FuzzBoxTest(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64}, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0)                               // a row on the box
	f.Add([]byte{205, 204, 204, 61, 0, 0, 0, 0, 0, 0, 0, 0}, 0.1, 0.0, 0.0, 0.1, 0.0, 0.0)                              // 0.1 is no float32
	f.Add([]byte{255, 255, 127, 127, 0, 0, 128, 127, 0, 0, 192, 127}, -1e300, -1e300, -1e300, 1e300, math.Inf(1), 1e39) // max, +Inf, NaN
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 128, 0, 0, 128, 255}, 0.0, math.Inf(-1), math.Inf(-1), 1e-45, 0.0, 0.0)           // subnormal, -0, -Inf
	dt, err := zarr.ParseDataType("float32")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, x0, y0, z0, x1, y1, z1 float64) {
		data = data[:len(data)/12*12]
		rows := len(data) / 12
		min, max := []float64{x0, y0, z0}, []float64{x1, y1, z1}
		bt := newBoxTest(dt, 3, min, max)
		got := bt.appendMatches(nil, data, 0, rows, 7)
		if want := appendMatches(nil, data, dt, 3, 0, rows, min, max); !slices.Equal(got, want) {
			t.Fatalf("every axis: rows %v, float64 test %v", got, want)
		}
		for axes := uint8(1); axes <= 7; axes++ { // and with the rows' bytes copied as they are found
			rs := bt.appendMatches(nil, data, 0, rows, axes)
			gotRows, gotBytes := bt.appendMatchesCopy([]int32{-1}, []byte("pre"), data, 0, rows, axes)
			if !slices.Equal(gotRows[1:], rs) || string(gotBytes[:3]) != "pre" || !slices.Equal(gotBytes[3:], gather(nil, data, rs, 12)) {
				t.Fatalf("axes %b: copying finds rows %v and bytes %x, not %v", axes, gotRows[1:], gotBytes[3:], rs)
			}
		}
		for i := range 3 {
			got := bt.appendMatches(nil, data, 0, rows, 1<<i)
			var want []int32
			for r := range rows {
				v := float64(math.Float32frombits(binary.LittleEndian.Uint32(data[12*r+4*i:])))
				if v >= min[i] && v <= max[i] {
					want = append(want, int32(r))
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("axis %d: rows %v, float64 test %v", i, got, want)
			}
		}
	})
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
