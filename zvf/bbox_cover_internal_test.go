package zvf

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zarr"
)

// TestCoverRunAsCutAxes: a chunk's cut axes from the box's cover runs
// are cutAxes' own, for chunk shapes that are and are not exact in
// binary, boxes on, beside and between cell faces, and keys in and around
// the runs; a bound beyond exact integers (or NaN) keeps cutAxes.
func TestCoverRunAsCutAxes(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	f32, err := zarr.ParseDataType("float32")
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range []float64{10, 125, 0.1, 1.0 / 3, 1e-3, 7e5} {
		l := &Level{s: &Store{dims: 3}, keyArity: 3, chunkShape: []float64{cs, cs, cs}}
		bound := func() float64 {
			c := float64(rng.IntN(41) - 20)
			switch rng.IntN(4) {
			case 0:
				return c * cs // on a face
			case 1:
				return math.Nextafter(c*cs, math.Inf(1))
			case 2:
				return math.Nextafter(c*cs, math.Inf(-1))
			}
			return (c + rng.Float64()) * cs
		}
		for range 2000 {
			var lo, hi [3]float64
			for a := range 3 {
				x, y := bound(), bound()
				lo[a], hi[a] = min(x, y), max(x, y)
			}
			bt := newBoxTest(f32, 3, lo[:], hi[:])
			bt.setCover(l)
			if !bt.cover {
				t.Fatalf("chunk %v box %v–%v: no cover runs", cs, lo, hi)
			}
			for k := range 24 {
				key := Key{int64(rng.IntN(45) - 22), int64(rng.IntN(45) - 22), int64(rng.IntN(45) - 22)}
				if k >= 20 { // coordinates where cut3's unsigned difference wraps
					key[rng.IntN(3)] = []int64{math.MinInt64, math.MaxInt64, math.MinInt64 + 1, math.MaxInt64 - 1}[k-20]
				}
				if got, want := bt.cut3(key), l.cutAxes(key, lo[:], hi[:]); got != want {
					t.Fatalf("chunk %v box %v–%v key %v: cut %03b, cutAxes %03b", cs, lo, hi, key, got, want)
				}
			}
		}
	}
	// Two axes: cutOfAxes' loop, not cut3's unrolled compares.
	l2 := &Level{s: &Store{dims: 2}, keyArity: 2, chunkShape: []float64{10, 0.1}}
	for range 2000 {
		var lo, hi [2]float64
		for a := range 2 {
			x, y := (rng.Float64()-0.5)*40*l2.chunkShape[a], (rng.Float64()-0.5)*40*l2.chunkShape[a]
			lo[a], hi[a] = min(x, y), max(x, y)
		}
		bt := newBoxTest(f32, 2, lo[:], hi[:])
		bt.setCover(l2)
		key := Key{int64(rng.IntN(45) - 22), int64(rng.IntN(45) - 22)}
		if got, want := bt.cutOfAxes(key), l2.cutAxes(key, lo[:], hi[:]); !bt.cover || got != want {
			t.Fatalf("2 axes, box %v–%v key %v: cut %02b (cover %v), cutAxes %02b", lo, hi, key, got, bt.cover, want)
		}
	}
	l := &Level{s: &Store{dims: 3}, keyArity: 3, chunkShape: []float64{1, 1, 1}}
	for _, b := range []float64{math.NaN(), math.Inf(1), 1e300} {
		bt := newBoxTest(f32, 3, []float64{0, 0, 0}, []float64{1, b, 1})
		if bt.setCover(l); bt.cover {
			t.Errorf("bound %v: cover runs set", b)
		}
	}
}
