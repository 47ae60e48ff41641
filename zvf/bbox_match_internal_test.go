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
