package neuroglancer

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// BenchmarkPlanStreamlines builds the spatial index of 2,000 random-walk
// streamlines of 100 vertices (steps of up to 30 in a 1000-cube, chunks
// of 100: about a third of the segments leave their chunk, some across an
// edge or corner), as polylines and as their lines, from a store whose
// chunks are cached: the plan's own cost, which walking each segment's
// chunks adds to (and, for polylines that cross an edge or corner, the
// read of their vertices).
func BenchmarkPlanStreamlines(b *testing.B) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 4))
	const n, per = 2000, 100
	pos := make([]float32, 0, 3*n*per)
	offsets := []int{0}
	for range n {
		x, y, z := r.Float64()*1000, r.Float64()*1000, r.Float64()*1000
		for range per {
			step := func(v float64) float64 { return min(max(v+(r.Float64()-0.5)*60, 0), 999) }
			x, y, z = step(x), step(y), step(z)
			pos = append(pos, float32(x), float32(y), float32(z))
		}
		offsets = append(offsets, len(pos)/3)
	}
	w := zvftest.Store(b, "mem://")
	if _, err := writer.WritePolylines(ctx, w, "s", &writer.Polylines{Positions: pos, Offsets: offsets},
		writer.Options{ChunkShape: []float64{100, 100, 100}}); err != nil {
		b.Fatal(err)
	}
	st, err := zvf.Open(ctx, storage.Sub(w, "s"), zvf.Options{Name: "s", Cache: cache.New(512 << 20)})
	if err != nil {
		b.Fatal(err)
	}
	for _, k := range []kind{kindPolyline, kindLine} {
		b.Run(k.annotationType(), func(b *testing.B) {
			if _, err := buildPlan(ctx, st, k, 0); err != nil { // warms the store's cache
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := buildPlan(ctx, st, k, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
