// Package demo builds the built-in synthetic dataset: a deterministic
// tissue block (seeded) written as one ZVF store per geometry family, so a
// newcomer sees real-looking data with nothing to download and benchmarks
// can make large stores in seconds.
//
// The scene, in a 1000 x 1000 x 600 µm block:
//   - cells: soma point clouds (one object per cell) with a categorical
//     cell_type and a float intensity per point, per-cell radius and
//     volume, one group per cell type;
//   - axons: streamlines in three bundles, with fractional anisotropy per
//     point, per-fibre length and one group per bundle;
//   - skeletons: dendritic trees rooted at neuron somata, radius per node;
//   - meshes: surface meshes of a few large somata and a blood vessel.
//
// Every store has three levels of detail (level 0 plus two per-object
// metavertex levels). Scale multiplies the object counts.
package demo

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// Options control the scene.
type Options struct {
	Seed int64
	// Scale multiplies object counts (0 means 1). Scale 1 is about 0.2
	// million vertices; scale 10 about 2 million.
	Scale float64
	// Codec of the level-0 blobs (default none, the reference default).
	Codec writer.Codec
	// Concurrency bounds chunk writes (0: GOMAXPROCS).
	Concurrency int
}

// StoreInfo names one written store; the server opens it at Prefix.
type StoreInfo struct {
	Name     string // cells, axons, skeletons, meshes
	Prefix   string // key prefix of the store root inside the writer (open it with storage.Sub)
	Geometry string // geometry_types entry
	Vertices int    // level-0 vertex count
	Levels   int
}

// Scene block and grid. Chunks of 250 µm hold a few hundred cells each;
// bins of 25 µm give per-bin fragments where geometry uses bins.
const (
	blockX, blockY, blockZ = 1000.0, 1000.0, 600.0

	chunkEdge = 250.0
	binEdge   = 25.0
)

func storeOptions(o *Options) writer.Options {
	return writer.Options{
		ChunkShape:  []float64{chunkEdge, chunkEdge, chunkEdge},
		BinShape:    []float64{binEdge, binEdge, binEdge},
		Bounds:      &[2][]float64{{0, 0, 0}, {blockX, blockY, blockZ}},
		Unit:        "micrometer", // the tissue block is 1000 × 1000 × 600 µm
		Codec:       o.Codec,
		Concurrency: o.Concurrency,
		// Three levels of detail: metavertices on 50 µm, then 200 µm bins.
		Pyramid:      []writer.PyramidLevel{{Coarsen: 2}, {Coarsen: 8}},
		SparsitySeed: uint64(o.Seed),
	}
}

// maxScale keeps a typo from asking for billions of vertices.
const maxScale = 1000

// Scene is the generated input of the four stores, exactly what a reader
// must return from them (tests and the reference check compare against it).
type Scene struct {
	Cells     *writer.PointCloud
	Axons     *writer.Polylines
	Skeletons *writer.Graph
	Meshes    *writer.Mesh
}

// Generate builds the scene in memory without writing it.
func Generate(o Options) (*Scene, error) {
	if o.Scale == 0 {
		o.Scale = 1
	}
	if !(o.Scale > 0) || o.Scale > maxScale {
		return nil, fmt.Errorf("demo: scale %v outside (0, %d]", o.Scale, maxScale)
	}
	sc := newScene(o)
	// Order matters: each part draws from the same seeded stream.
	out := &Scene{Cells: sc.cells()}
	out.Axons = sc.axons()
	out.Skeletons = sc.skeletons()
	out.Meshes = sc.meshes()
	return out, nil
}

// Build writes the four demo stores into w under cells/, axons/,
// skeletons/ and meshes/.
func Build(ctx context.Context, w storage.Writer, o Options) ([]StoreInfo, error) {
	sc, err := Generate(o)
	if err != nil {
		return nil, err
	}
	var out []StoreInfo
	add := func(name, geometry string, sum *writer.Summary, err error) error {
		if err != nil {
			return fmt.Errorf("demo: write %s: %w", name, err)
		}
		out = append(out, StoreInfo{Name: name, Prefix: name, Geometry: geometry,
			Vertices: sum.Levels[0].VertexCount, Levels: len(sum.Levels)})
		return nil
	}
	wo := storeOptions(&o)
	sum, err := writer.WritePoints(ctx, w, "cells", sc.Cells, wo)
	if err := add("cells", "point_cloud", sum, err); err != nil {
		return nil, err
	}
	sum, err = writer.WritePolylines(ctx, w, "axons", sc.Axons, wo)
	if err := add("axons", "streamline", sum, err); err != nil {
		return nil, err
	}
	sum, err = writer.WriteGraph(ctx, w, "skeletons", sc.Skeletons, wo)
	if err := add("skeletons", "skeleton", sum, err); err != nil {
		return nil, err
	}
	sum, err = writer.WriteMesh(ctx, w, "meshes", sc.Meshes, wo)
	if err := add("meshes", "mesh", sum, err); err != nil {
		return nil, err
	}
	return out, nil
}

// cell is one soma of the scene; skeletons and meshes reuse them.
type cell struct {
	center [3]float64
	radius float64
	kind   int
}

// neuron is the index of "neuron" in scene.types.
const neuron = 2

type scene struct {
	o        Options
	rng      *rand.Rand
	cellz    []cell
	blockMax [3]float64
	types    []string // categorical cell types, sorted
}

func newScene(o Options) *scene {
	s := &scene{o: o, rng: rand.New(rand.NewPCG(uint64(o.Seed), 0x7a7666)),
		blockMax: [3]float64{blockX, blockY, blockZ},
		types:    []string{"astrocyte", "microglia", "neuron", "oligodendrocyte"}}
	n := s.count(1500)
	s.cellz = make([]cell, n)
	for i := range s.cellz {
		c := &s.cellz[i]
		// Cortical-like layering: neurons crowd two bands along y.
		u := s.rng.Float64()
		switch {
		case u < 0.45:
			c.kind = neuron
		case u < 0.70:
			c.kind = 0
		case u < 0.90:
			c.kind = 3
		default:
			c.kind = 1
		}
		c.radius = [4]float64{6, 4, 10, 5}[c.kind] * (0.8 + 0.4*s.rng.Float64())
		m := c.radius + 2
		for a := range 3 {
			c.center[a] = m + s.rng.Float64()*(s.blockMax[a]-2*m)
		}
		if c.kind == neuron {
			band := []float64{300, 700}[s.rng.IntN(2)]
			c.center[1] = clamp(band+s.rng.NormFloat64()*90, m, s.blockMax[1]-m)
		}
	}
	return s
}

// count scales a default-scale object count (at least 1).
func (s *scene) count(base int) int {
	return max(1, int(math.Round(float64(base)*s.o.Scale)))
}

func clamp(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }

// inside clamps a point into the block (the writer rejects points outside
// the declared bounds).
func (s *scene) inside(p [3]float64) [3]float32 {
	var out [3]float32
	for a := range 3 {
		out[a] = float32(clamp(p[a], 0, s.blockMax[a]))
	}
	return out
}

// advance turns direction d by keep*d + pull*toward + jitter*(random unit
// vector), normalises it and moves p one step along it. It reports false,
// leaving p unchanged, when the step would leave the block.
func (s *scene) advance(p, d *[3]float64, toward [3]float64, keep, pull, jitter, step float64) bool {
	w := s.unit()
	for a := range 3 {
		d[a] = keep*d[a] + pull*toward[a] + jitter*w[a]
	}
	nd := math.Sqrt(d[0]*d[0] + d[1]*d[1] + d[2]*d[2])
	var next [3]float64
	for a := range 3 {
		d[a] /= nd
		next[a] = p[a] + step*d[a]
		if next[a] < 0 || next[a] > s.blockMax[a] {
			return false
		}
	}
	*p = next
	return true
}

// unit returns a uniformly random unit vector.
func (s *scene) unit() [3]float64 {
	for {
		v := [3]float64{s.rng.NormFloat64(), s.rng.NormFloat64(), s.rng.NormFloat64()}
		n := math.Sqrt(v[0]*v[0] + v[1]*v[1] + v[2]*v[2])
		if n > 1e-9 {
			return [3]float64{v[0] / n, v[1] / n, v[2] / n}
		}
	}
}

// cells builds the soma point clouds: points fill each soma (denser at the
// centre), intensity falls off from the centre and depends on cell type.
func (s *scene) cells() *writer.PointCloud {
	var pos []float32
	var ids []int64
	var types []string
	var inten []float32
	radius := make([]float32, len(s.cellz))
	volume := make([]float32, len(s.cellz))
	groups := make([][]int64, len(s.types))
	counts := make([]int32, len(s.types))
	for i, c := range s.cellz {
		np := 16 + int(c.radius*c.radius/4)
		base := [4]float64{120, 60, 200, 90}[c.kind] * (0.7 + 0.6*s.rng.Float64())
		for range np {
			u := s.unit()
			r := c.radius * math.Cbrt(s.rng.Float64())
			p := s.inside([3]float64{c.center[0] + u[0]*r, c.center[1] + u[1]*r, c.center[2] + u[2]*r*0.8})
			pos = append(pos, p[:]...)
			ids = append(ids, int64(i))
			types = append(types, s.types[c.kind])
			inten = append(inten, float32(base*(1-0.5*r/c.radius)+s.rng.NormFloat64()*5))
		}
		radius[i] = float32(c.radius)
		volume[i] = float32(4.0 / 3 * math.Pi * c.radius * c.radius * c.radius * 0.8)
		groups[c.kind] = append(groups[c.kind], int64(i))
		counts[c.kind]++
	}
	return &writer.PointCloud{
		Positions: pos,
		ObjectIDs: ids,
		Attributes: []writer.Attribute{
			writer.CategoricalAttribute("cell_type", types),
			writer.Float32Attribute("intensity", 1, inten),
		},
		ObjectAttributes: []writer.Attribute{
			writer.Float32Attribute("radius", 1, radius),
			writer.Float32Attribute("volume", 1, volume),
		},
		Groups:          groups,
		GroupAttributes: []writer.Attribute{writer.Int32Attribute("cell_count", 1, counts)},
	}
}

// axons builds three bundles of fibres: each fibre enters on a block face,
// follows its bundle direction with a smooth random wobble and stops when
// it leaves the block.
func (s *scene) axons() *writer.Polylines {
	bundles := [][3]float64{{1, 0.15, 0.05}, {0.1, 1, -0.2}, {0.5, 0.3, 0.8}}
	for i := range bundles {
		b := &bundles[i]
		n := math.Sqrt(b[0]*b[0] + b[1]*b[1] + b[2]*b[2])
		b[0], b[1], b[2] = b[0]/n, b[1]/n, b[2]/n
	}
	n := s.count(250)
	pl := &writer.Polylines{Offsets: []int{0}}
	var fa []float32
	length := make([]float32, n)
	groups := make([][]int64, len(bundles))
	const step = 4.0
	for f := range n {
		bi := f % len(bundles)
		dir := bundles[bi]
		// Start on the entry face of the bundle's main axis.
		var p [3]float64
		axis := 0
		for a := range 3 {
			if math.Abs(dir[a]) > math.Abs(dir[axis]) {
				axis = a
			}
		}
		for a := range 3 {
			p[a] = s.blockMax[a] * (0.1 + 0.8*s.rng.Float64())
		}
		p[axis] = 0.5
		d := dir
		faBase := 0.45 + 0.35*s.rng.Float64()
		var total float64
		for k := 0; k < 600; k++ {
			q := s.inside(p)
			pl.Positions = append(pl.Positions, q[:]...)
			fa = append(fa, float32(faBase+0.1*math.Sin(float64(k)/15)))
			if !s.advance(&p, &d, dir, 0.85, 0.1, 0.12, step) {
				break
			}
			total += step
		}
		pl.Offsets = append(pl.Offsets, len(pl.Positions)/3)
		length[f] = float32(total)
		groups[bi] = append(groups[bi], int64(f))
	}
	pl.Attributes = []writer.Attribute{writer.Float32Attribute("fa", 1, fa)}
	pl.ObjectAttributes = []writer.Attribute{writer.Float32Attribute("length", 1, length)}
	pl.Groups = groups
	return pl
}

// skeletons grows a dendritic tree from each of the first neurons: nodes
// are emitted depth-first (parent before child), edges are [child, parent].
func (s *scene) skeletons() *writer.Graph {
	g := &writer.Graph{Skeleton: true}
	var radius []float32
	want := s.count(30)
	oid := int64(0)
	for _, c := range s.cellz {
		if c.kind != neuron || int(oid) == want {
			continue
		}
		root := int64(len(g.Positions) / 3)
		q := s.inside(c.center)
		g.Positions = append(g.Positions, q[:]...)
		g.ObjectIDs = append(g.ObjectIDs, oid)
		radius = append(radius, float32(c.radius))
		prim := 4 + s.rng.IntN(4)
		for range prim {
			s.branch(g, &radius, root, c.center, s.unit(), c.radius*0.3, 0, oid)
		}
		oid++
	}
	g.Attributes = []writer.Attribute{writer.Float32Attribute("radius", 1, radius)}
	return g
}

// branch extends a dendrite from node parent; it may fork into two.
func (s *scene) branch(g *writer.Graph, radius *[]float32, parent int64, at, dir [3]float64, r float64, depth int, oid int64) {
	const step = 3.0
	steps := 20 + s.rng.IntN(40)
	p := at
	for k := range steps {
		if !s.advance(&p, &dir, [3]float64{}, 0.9, 0, 0.15, step) {
			return
		}
		idx := int64(len(g.Positions) / 3)
		q := s.inside(p)
		g.Positions = append(g.Positions, q[:]...)
		g.ObjectIDs = append(g.ObjectIDs, oid)
		g.Edges = append(g.Edges, idx, parent)
		*radius = append(*radius, float32(math.Max(0.3, r*(1-float64(k)/float64(steps+20)))))
		parent = idx
		if depth < 2 && k > 8 && s.rng.Float64() < 0.03 {
			s.branch(g, radius, parent, p, s.unit(), r*0.7, depth+1, oid)
		}
	}
	if depth < 2 {
		for range 2 {
			s.branch(g, radius, parent, p, s.unit(), r*0.7, depth+1, oid)
		}
	}
}

// meshes builds closed surfaces: a bumpy sphere around each of the largest
// somata and a tube for a blood vessel winding through the block.
func (s *scene) meshes() *writer.Mesh {
	m := &writer.Mesh{FaceWidth: 3, FragmentPerObject: true}
	var dist []float32
	var area []float32
	oid := int64(0)
	for _, c := range s.cellz {
		if c.kind != neuron || c.radius < 10 || int(oid) == s.count(6) {
			continue
		}
		const rings, segs = 16, 32
		base := int64(len(m.Positions) / 3)
		bump := s.rng.Float64() * 2 * math.Pi
		for i := 0; i <= rings; i++ {
			th := math.Pi * float64(i) / rings
			for j := range segs {
				ph := 2 * math.Pi * float64(j) / segs
				r := 1.4 * c.radius * (1 + 0.12*math.Sin(3*ph+bump)*math.Sin(2*th))
				p := [3]float64{c.center[0] + r*math.Sin(th)*math.Cos(ph),
					c.center[1] + r*math.Sin(th)*math.Sin(ph), c.center[2] + r*math.Cos(th)}
				q := s.inside(p)
				m.Positions = append(m.Positions, q[:]...)
				m.ObjectIDs = append(m.ObjectIDs, oid)
				dist = append(dist, float32(r))
			}
		}
		area = append(area, s.grid(m, base, rings, segs))
		oid++
	}
	// The vessel: a tube along a sine path across x.
	const rings, segs = 160, 20
	base := int64(len(m.Positions) / 3)
	phase := s.rng.Float64() * 2 * math.Pi
	for i := 0; i <= rings; i++ {
		x := 20 + 960*float64(i)/rings
		cy := 500 + 200*math.Sin(x/180+phase)
		cz := 300 + 120*math.Cos(x/260+phase)
		for j := range segs {
			ph := 2 * math.Pi * float64(j) / segs
			r := 14.0
			q := s.inside([3]float64{x, cy + r*math.Cos(ph), cz + r*math.Sin(ph)})
			m.Positions = append(m.Positions, q[:]...)
			m.ObjectIDs = append(m.ObjectIDs, oid)
			dist = append(dist, float32(r))
		}
	}
	area = append(area, s.grid(m, base, rings, segs))
	m.Attributes = []writer.Attribute{writer.Float32Attribute("radius", 1, dist)}
	m.ObjectAttributes = []writer.Attribute{writer.Float32Attribute("area", 1, area)}
	return m
}

// grid adds the triangles of a (rings+1) x segs vertex grid wrapped around
// its segment axis and returns the surface area.
func (s *scene) grid(m *writer.Mesh, base int64, rings, segs int) float32 {
	var total float64
	at := func(i int64) [3]float64 {
		p := m.Positions[3*i : 3*i+3]
		return [3]float64{float64(p[0]), float64(p[1]), float64(p[2])}
	}
	for i := range rings {
		for j := range segs {
			a := base + int64(i*segs+j)
			b := base + int64(i*segs+(j+1)%segs)
			c := a + int64(segs)
			d := b + int64(segs)
			for _, f := range [][3]int64{{a, c, b}, {b, c, d}} {
				p, q, r := at(f[0]), at(f[1]), at(f[2])
				u := [3]float64{q[0] - p[0], q[1] - p[1], q[2] - p[2]}
				v := [3]float64{r[0] - p[0], r[1] - p[1], r[2] - p[2]}
				cx := u[1]*v[2] - u[2]*v[1]
				cy := u[2]*v[0] - u[0]*v[2]
				cz := u[0]*v[1] - u[1]*v[0]
				a2 := math.Sqrt(cx*cx + cy*cy + cz*cz)
				if a2 == 0 {
					continue // pole rings collapse to a point: skip degenerate faces
				}
				total += a2 / 2
				m.Faces = append(m.Faces, f[:]...)
			}
		}
	}
	return float32(total)
}
