package zvf_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// gridOracle counts positions (float32 × 3) in the cells of a grid with
// boundaries b per axis, by the stated rule, found by scanning: a vertex
// is in the last cell whose lower boundary it reaches, none when below
// the first; past b[n] it is in the last cell on a closed axis and in
// none on an open one; above hi (the box) in none.
func gridOracle(pos []float32, b [3][]float64, hi []float64, open [3]bool) []uint32 {
	n := [3]int{len(b[0]) - 1, len(b[1]) - 1, len(b[2]) - 1}
	out := make([]uint32, n[0]*n[1]*n[2])
	for r := 0; r < len(pos)/3; r++ {
		idx, stride, in := 0, 1, true
		for a := range 3 {
			v := float64(pos[3*r+a])
			if v < b[a][0] || v > hi[a] || (open[a] && v >= b[a][n[a]]) {
				in = false
				break
			}
			i := 0
			for c := range n[a] {
				if b[a][c] <= v {
					i = c
				}
			}
			idx += i * stride
			stride *= n[a]
		}
		if in {
			out[idx]++
		}
	}
	return out
}

// TestDensityBinsMatchBruteForce: densities and voxel counts where whole
// chunks are counted bin by bin (each row's cell by compares with its
// bin's inner cell boundaries) equal a brute-force count, with vertices
// on cell boundaries (coordinates on a 1/8 lattice, cells of lattice
// widths), boundaries no float32 holds (thirds, sevenths), cells wider
// than bins, narrower (more boundaries in a bin than it compares with)
// and open axes ending inside a chunk.
func TestDensityBinsMatchBruteForce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(11, 3))
	const n = 12_000
	pos := make([]float32, 3*n)
	for i := range pos {
		if i%2 == 0 {
			pos[i] = float32(r.IntN(8*400+1)) / 8 // on a lattice: many on boundaries
		} else {
			pos[i] = float32(r.Float64() * 400)
		}
	}
	// Vertices at and beside the float32s nearest boundaries no float32
	// holds (the thirds, sevenths and ninths of 400 asked below).
	for _, k := range []int{3, 7, 9} {
		for i := 1; i < k; i++ {
			b := float32(400 * float64(i) / float64(k))
			for _, v := range []float32{math.Nextafter32(b, 0), b, math.Nextafter32(b, 500)} {
				for a := range 3 {
					p := []float32{float32(r.Float64() * 400), float32(r.Float64() * 400), float32(r.Float64() * 400)}
					p[a] = v
					pos = append(pos, p...)
				}
			}
		}
	}
	mem := zvftest.Store(t, "mem://")
	o := writer.Options{ChunkShape: []float64{100, 100, 100}, BinShape: []float64{20, 20, 20}}
	if _, err := writer.WritePoints(ctx, mem, "lattice", &writer.PointCloud{Positions: pos}, o); err != nil {
		t.Fatal(err)
	}
	l := zvftest.OpenLevel(t, storage.Sub(mem, "lattice"), zvf.Options{Name: "lattice", Cache: cache.New(64 << 20)}, 0)
	for _, c := range []struct {
		min, max []float64
		shape    []int
	}{
		{[]float64{0, 0, 0}, []float64{400, 400, 400}, []int{16, 32, 64}},   // boundaries on the lattice, cells ≤ bins
		{[]float64{0, 0, 0}, []float64{400, 400, 400}, []int{3, 7, 9}},      // boundaries no float32 holds
		{[]float64{0, 0, 0}, []float64{400, 400, 400}, []int{160, 80, 2}},   // bins of 8 and 4 cells on x and y
		{[]float64{0, 0, 0}, []float64{400, 400, 400}, []int{1, 1, 1}},      // one cell
		{[]float64{-50, 0, 0}, []float64{450, 400, 400}, []int{40, 30, 20}}, // beyond the store
		{[]float64{0, 100, 0}, []float64{300, 300, 200}, []int{13, 24, 50}}, // chunks covered and not
	} {
		got, err := l.Density(ctx, zvf.DensityQuery{Min: c.min, Max: c.max, Shape: c.shape})
		if err != nil {
			t.Fatal(err)
		}
		var b [3][]float64
		for a := range 3 {
			w := (c.max[a] - c.min[a]) / float64(c.shape[a])
			for i := 0; i <= c.shape[a]; i++ {
				b[a] = append(b[a], c.min[a]+float64(i)*w)
			}
		}
		if want := gridOracle(pos, b, c.max, [3]bool{}); !slices.Equal(got, want) {
			t.Errorf("density %v–%v shape %v differs from the brute-force count", c.min, c.max, c.shape)
		}
	}
	for _, c := range []struct {
		voxel  []float64
		lo, hi []int64
		closed []bool
	}{
		{[]float64{12.5, 25, 50}, []int64{0, 0, 0}, []int64{32, 16, 8}, []bool{true, true, true}},
		{[]float64{12.5, 25, 50}, []int64{0, 2, 1}, []int64{17, 9, 7}, []bool{false, false, false}}, // open ends inside chunks
		{[]float64{1.0 / 3, 7, 100.0 / 7}, []int64{0, 0, 0}, []int64{1200, 58, 28}, []bool{true, false, true}},
	} {
		got, err := l.Voxels(ctx, zvf.VoxelQuery{Voxel: c.voxel, Lo: c.lo, Hi: c.hi, Closed: c.closed})
		if err != nil {
			t.Fatal(err)
		}
		var b [3][]float64
		var open [3]bool
		hi := make([]float64, 3)
		for a := range 3 {
			for v := c.lo[a]; v <= c.hi[a]; v++ {
				b[a] = append(b[a], float64(v)*c.voxel[a])
			}
			open[a] = !c.closed[a]
			hi[a] = b[a][len(b[a])-1]
		}
		if want := gridOracle(pos, b, hi, open); !slices.Equal(got, want) {
			t.Errorf("voxels %s differ from the brute-force count", fmt.Sprint(c))
		}
	}
}
