package writer

import (
	"context"
	"math/rand/v2"
	"testing"
)

// benchCloud is a million points in a 1000^3 block with two attributes.
func benchCloud(n int) *PointCloud {
	r := rand.New(rand.NewPCG(1, 2))
	pos := make([]float32, 3*n)
	for i := range pos {
		pos[i] = float32(r.Float64() * 999)
	}
	inten := make([]float32, n)
	label := make([]int32, n)
	for i := range inten {
		inten[i] = float32(r.NormFloat64())
		label[i] = int32(r.IntN(7))
	}
	return &PointCloud{Positions: pos, Attributes: []Attribute{
		Float32Attribute("intensity", 1, inten), Int32Attribute("label", 1, label)}}
}

// BenchmarkWritePoints1M reports write throughput (vertices/s) for one
// million binned points into memory, with and without a pyramid level and
// compression.
func BenchmarkWritePoints1M(b *testing.B) {
	const n = 1_000_000
	pc := benchCloud(n)
	for _, bc := range []struct {
		name string
		o    Options
	}{
		{"none", Options{}},
		{"zstd", Options{Codec: CodecZstd}},
		{"blosc", Options{Codec: CodecBlosc}},
		{"none+pyramid", Options{Pyramid: []PyramidLevel{{Coarsen: 2}}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			o := bc.o
			o.ChunkShape = []float64{250, 250, 250}
			o.BinShape = []float64{50, 50, 50}
			for b.Loop() {
				if _, err := WritePoints(context.Background(), newMemStore(), "", pc, o); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "vertices/s")
		})
	}
}

// BenchmarkLayoutBins isolates the chunk/bin bucketing of a million points.
func BenchmarkLayoutBins(b *testing.B) {
	pc := benchCloud(1_000_000)
	o := Options{ChunkShape: []float64{250, 250, 250}, BinShape: []float64{50, 50, 50}}
	g, err := prepare(&o, pc.Positions, "point_cloud", "implicit_sequential")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		chunkByBin(g, pc.Positions, 125)
	}
}
