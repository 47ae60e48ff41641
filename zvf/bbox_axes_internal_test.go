package zvf

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zarr"
)

// FuzzMatchVertsAxes: matching a chunk (whose rows lie in its cell, or
// not: a misfiled row) finds, in order, the rows the float64 test of
// every axis finds, and copies exactly their bytes, for any box: testing
// only the axes on which the box cuts the cell changes nothing.
func FuzzMatchVertsAxes(f *testing.F) {
	f.Add([]byte{0, 0, 0, 255, 255, 255, 128, 128, 128, 10, 250, 3}, 12.0, 19.0, -31.0, 14.0, 40.0, 0.0, false)
	f.Add([]byte{0, 0, 0, 255, 255, 255, 128, 128, 128}, 10.0, 20.0, -30.0, 20.0, 30.0, -20.0, false) // the cell itself
	f.Add([]byte{0, 0, 0, 255, 255, 255, 128, 128, 128}, 15.0, 0.0, -100.0, 15.0, 100.0, 100.0, true) // a slab, a misfiled row
	f.Add([]byte{0, 128, 0, 7, 128, 9}, -100.0, 25.0, -100.0, 100.0, 25.5, 100.0, true)               // a row misfiled on an axis the box does not cut
	dt, err := zarr.ParseDataType("float32")
	if err != nil {
		f.Fatal(err)
	}
	l := &Level{s: &Store{dims: 3}, keyArity: 3, vdt: dt, chunkShape: []float64{10, 10, 10}}
	key := Key{1, 2, -3} // the cell [10, 20] × [20, 30] × [-30, -20]
	f.Fuzz(func(t *testing.T, b []byte, x0, y0, z0, x1, y1, z1 float64, misfile bool) {
		min, max := []float64{x0, y0, z0}, []float64{x1, y1, z1}
		if l.checkBox(min, max) != nil {
			return
		}
		b = b[:len(b)/3*3]
		data := make([]byte, 0, len(b)*4)
		for i, v := range b {
			c := float32(key[i%3]*10) + float32(v)/25.5 // 0 … 10 inside the cell, both faces included
			if misfile && i == 0 {
				c = -1e6
			}
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(c))
		}
		cv := &chunkVerts{data: data, rows: len(b) / 3}
		l.markContainment(key, cv)
		if cv.inCell == (misfile && cv.rows > 0) {
			t.Fatalf("inCell %v with a misfiled row %v", cv.inCell, misfile)
		}
		want := appendMatches(nil, data, dt, 3, 0, cv.rows, min, max)
		for _, copying := range []bool{false, true} {
			bt := newBoxTest(dt, 3, min, max)
			m := chunkMatch{copy: copying, bt: &bt}
			l.matchVerts(key, cv, min, max, &m)
			var got []int32
			for i := range m.count() {
				got = append(got, int32(m.row(i)))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("copying %v: rows %v, every axis tested %v", copying, got, want)
			}
			if copying && !m.all && !slices.Equal(m.vdata, gather(nil, data, want, 12)) {
				t.Fatalf("copied %x, not the rows' bytes", m.vdata)
			}
		}
	})
}
