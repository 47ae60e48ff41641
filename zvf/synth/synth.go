// Package synth builds synthetic ZVF stores in memory for benchmarks and
// the load benchmarks (cmd/zvfbench): a uniform point cloud of a given
// size with three attributes and a pyramid, per-object point sets, and
// streamlines.
package synth

import (
	"context"
	"math"
	"math/rand/v2"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// Side is the edge of the cube the points fill.
const Side = 1000.0

// BoxFor returns a cube corner pair at (offset, offset, offset) that holds
// about want of n uniform points.
func BoxFor(n, want int, offset float64) (min, max []float64) {
	frac := float64(want) / float64(n)
	edge := Side * math.Cbrt(frac)
	return []float64{offset, offset, offset}, []float64{offset + edge, offset + edge, offset + edge}
}

// Points writes n uniform points with intensity, snr and depth attributes
// (chunk 125, bins 25) and two pyramid levels into a fresh mem:// store
// under prefix "points", and returns the store.
func Points(ctx context.Context, n int, seed uint64, codec writer.Codec) (storage.Writer, error) {
	return PointsChunked(ctx, n, seed, codec, 125)
}

// PointsChunked is Points with chunks of edge chunk (bins of chunk/5):
// the same points in more, smaller chunks make a store of more files.
func PointsChunked(ctx context.Context, n int, seed uint64, codec writer.Codec, chunk float64) (storage.Writer, error) {
	r := rand.New(rand.NewPCG(seed, 7))
	pos := make([]float32, 3*n)
	inten := make([]float32, n)
	snr := make([]float32, n)
	depth := make([]int32, n)
	for i := 0; i < n; i++ {
		for k := 0; k < 3; k++ {
			pos[3*i+k] = float32(r.Float64() * Side)
		}
		inten[i] = float32(r.NormFloat64()*10 + 100)
		snr[i] = float32(r.Float64() * 30)
		depth[i] = int32(pos[3*i+2])
	}
	st, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		return nil, err
	}
	pc := &writer.PointCloud{Positions: pos, Attributes: []writer.Attribute{
		writer.Float32Attribute("intensity", 1, inten), writer.Float32Attribute("snr", 1, snr), writer.Int32Attribute("depth", 1, depth)}}
	_, err = writer.WritePoints(ctx, st, "points", pc, writer.Options{ChunkShape: []float64{chunk, chunk, chunk}, BinShape: []float64{chunk / 5, chunk / 5, chunk / 5},
		Codec: codec, Pyramid: []writer.PyramidLevel{{Coarsen: 2}, {Coarsen: 8}}})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	return st, nil
}

// ClusterBox is a box of Clustered's densest cluster, at its centre: with
// 2,000,000 points it holds about 49,000 of them in eight chunks it cuts,
// every one through its bins (the reference benchmark's medium_cluster).
var ClusterBox = [2][]float64{{660, 660, 660}, {740, 740, 740}}

// Clustered writes n points shaped like the reference benchmark's store:
// 60 % uniform in the cube, 40 % in four Gaussian clusters (the first at
// 700³, σ 45), chunk 100, bins 25, no attributes, under prefix "points" in
// a fresh mem:// store. Dense clusters are what viewers zoom into: few
// chunks, many rows each, every bin of the box's edge cut.
func Clustered(ctx context.Context, n int, seed uint64) (storage.Writer, error) {
	r := rand.New(rand.NewPCG(seed, 13))
	centres := [4][3]float64{{700, 700, 700}, {300, 700, 250}, {750, 250, 300}, {250, 250, 750}}
	sigma := [4]float64{45, 70, 60, 90}
	pos := make([]float32, 3*n)
	uniform := n * 6 / 10
	for i := 0; i < n; i++ {
		k := r.IntN(4)
		for a := 0; a < 3; a++ {
			x := r.Float64() * Side
			if i >= uniform {
				x = centres[k][a] + r.NormFloat64()*sigma[k]
			}
			pos[3*i+a] = float32(max(0, min(Side-1e-3, x)))
		}
	}
	st, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		return nil, err
	}
	_, err = writer.WritePoints(ctx, st, "points", &writer.PointCloud{Positions: pos},
		writer.Options{ChunkShape: []float64{100, 100, 100}, BinShape: []float64{25, 25, 25}})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	return st, nil
}

// Objects writes objects × perObject points, each object a compact blob,
// under prefix "objects" in a fresh mem:// store.
func Objects(ctx context.Context, objects, perObject int, seed uint64) (storage.Writer, error) {
	r := rand.New(rand.NewPCG(seed, 9))
	n := objects * perObject
	pos := make([]float32, 3*n)
	ids := make([]int64, n)
	for o := 0; o < objects; o++ {
		c := [3]float64{r.Float64() * Side, r.Float64() * Side, r.Float64() * Side}
		for i := 0; i < perObject; i++ {
			v := o*perObject + i
			ids[v] = int64(o)
			for k := 0; k < 3; k++ {
				x := c[k] + r.NormFloat64()*20
				x = max(0, min(Side, x))
				pos[3*v+k] = float32(x)
			}
		}
	}
	st, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		return nil, err
	}
	_, err = writer.WritePoints(ctx, st, "objects", &writer.PointCloud{Positions: pos, ObjectIDs: ids}, writer.Options{ChunkShape: []float64{125, 125, 125}})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	return st, nil
}

// Streamlines writes about n vertices of streamlines — smooth random walks
// of 200 vertices, 2 units a step, filling the same cube as Points — with
// a per-vertex "fa" attribute (chunk 125, bins 25) and two pyramid levels, under prefix
// "streamlines" in a fresh mem:// store.
func Streamlines(ctx context.Context, n int, seed uint64) (storage.Writer, error) {
	const perLine, step = 200, 2.0
	r := rand.New(rand.NewPCG(seed, 11))
	lines := max(1, n/perLine)
	pos := make([]float32, 0, 3*lines*perLine)
	fa := make([]float32, 0, lines*perLine)
	offsets := make([]int, 0, lines+1)
	offsets = append(offsets, 0)
	for l := 0; l < lines; l++ {
		p := [3]float64{r.Float64() * Side, r.Float64() * Side, r.Float64() * Side}
		d := [3]float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
		for i := 0; i < perLine; i++ {
			// Turn a little, stay inside the cube, step.
			norm := 0.0
			for k := range d {
				d[k] += r.NormFloat64() * 0.15
				norm += d[k] * d[k]
			}
			norm = math.Sqrt(norm)
			for k := range p {
				p[k] += step * d[k] / norm
				if p[k] < 0 || p[k] >= Side {
					d[k] = -d[k]
					p[k] = max(0, min(Side-1e-3, p[k]))
				}
				pos = append(pos, float32(p[k]))
			}
			fa = append(fa, float32(0.2+0.6*r.Float64()))
		}
		offsets = append(offsets, len(fa))
	}
	st, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		return nil, err
	}
	pl := &writer.Polylines{Positions: pos, Offsets: offsets, Attributes: []writer.Attribute{writer.Float32Attribute("fa", 1, fa)}}
	// Bins of 25 as for the points: a coarse level's metavertices are one
	// per bin (shared by the streamlines through it), so the pyramid keeps
	// enough of them to be worth choosing.
	_, err = writer.WritePolylines(ctx, st, "streamlines", pl, writer.Options{ChunkShape: []float64{125, 125, 125},
		BinShape: []float64{25, 25, 25}, Pyramid: []writer.PyramidLevel{{Coarsen: 2}, {Coarsen: 8}}})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	return st, nil
}
