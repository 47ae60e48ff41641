package writer

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// geom carries what every geometry writer validates and derives from
// Options before building level 0.
type geom struct {
	d           int
	chunk       []float64
	bin         []float64 // effective level-0 bin (chunk when no BinShape)
	bpc         []int64   // bins per chunk per axis
	bounds      [2][]float64
	axes        []string
	geometry    string // geometry_types entry
	linksConv   string
	hasBinShape bool
}

// maxCell bounds |position / cell| so chunk and bin coordinates stay exact
// in int64 and float64.
const maxCell = 1 << 52

func prepare(o *Options, pos []float32, geometry, linksConv string) (*geom, error) {
	d := len(o.ChunkShape)
	if d < 1 || d > maxDim {
		return nil, inputErr("Options.ChunkShape", -1, "need 1..%d axes, got %d", maxDim, d)
	}
	for i, c := range o.ChunkShape {
		if !(c > 0) || math.IsInf(c, 0) {
			return nil, inputErr("Options.ChunkShape", i, "%v is not a positive finite size", c)
		}
	}
	g := &geom{d: d, chunk: slices.Clone(o.ChunkShape), geometry: geometry, linksConv: linksConv}
	g.bin = g.chunk
	if o.BinShape != nil {
		if len(o.BinShape) != d {
			return nil, inputErr("Options.BinShape", -1, "%d axes, chunk shape has %d", len(o.BinShape), d)
		}
		g.bin = slices.Clone(o.BinShape)
		g.hasBinShape = true
	}
	g.bpc = make([]int64, d)
	for i := range d {
		b := g.bin[i]
		if !(b > 0) || math.IsInf(b, 0) {
			return nil, inputErr("Options.BinShape", i, "%v is not a positive finite size", b)
		}
		r := g.chunk[i] / b
		// The reference validator accepts a ratio within 1e-9 of an integer.
		if math.Abs(r-math.Round(r)) > 1e-9 || math.Round(r) < 1 {
			return nil, inputErr("Options.BinShape", i, "bin %v does not divide chunk %v", b, g.chunk[i])
		}
		g.bpc[i] = int64(math.Round(r))
	}
	if len(pos)%d != 0 {
		return nil, inputErr("positions", -1, "%d values is not a multiple of %d axes", len(pos), d)
	}
	if len(pos)/d > math.MaxInt32 {
		// Rows (and distinct chunks) are indexed with 32-bit integers to
		// halve the layout's memory.
		return nil, inputErr("positions", -1, "%d vertices exceed the %d this writer takes per store", len(pos)/d, math.MaxInt32)
	}
	lo, hi := make([]float64, d), make([]float64, d)
	for i := range d {
		lo[i], hi[i] = math.Inf(1), math.Inf(-1)
	}
	for i, v := range pos {
		a := i % d
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f/g.bin[a]) > maxCell {
			return nil, inputErr("positions", i/d, "coordinate %v on axis %d is not finite or too large", v, a)
		}
		lo[a] = min(lo[a], f)
		hi[a] = max(hi[a], f)
	}
	if o.Bounds != nil {
		if len(o.Bounds[0]) != d || len(o.Bounds[1]) != d {
			return nil, inputErr("Options.Bounds", -1, "need %d values per corner", d)
		}
		g.bounds = [2][]float64{slices.Clone(o.Bounds[0]), slices.Clone(o.Bounds[1])}
		for a := range d {
			// Readers show bounds as the data's box: a store written
			// with a reversed or infinite one shows a box holding nothing.
			bl, bh := g.bounds[0][a], g.bounds[1][a]
			if math.IsNaN(bl) || math.IsNaN(bh) || math.IsInf(bl, 0) || math.IsInf(bh, 0) || bl > bh {
				return nil, inputErr("Options.Bounds", -1, "axis %d is [%v, %v]: need finite numbers, min at most max", a, bl, bh)
			}
			if len(pos) > 0 && (lo[a] < g.bounds[0][a] || hi[a] > g.bounds[1][a]) {
				return nil, inputErr("positions", -1, "axis %d spans [%v, %v], outside bounds [%v, %v]",
					a, lo[a], hi[a], g.bounds[0][a], g.bounds[1][a])
			}
		}
	} else if len(pos) == 0 {
		// The reference's default bounds for a store without data.
		g.bounds = [2][]float64{make([]float64, d), make([]float64, d)}
		for a := range d {
			g.bounds[1][a] = 128
		}
	} else {
		g.bounds = [2][]float64{lo, hi}
	}
	g.axes = o.Axes
	if g.axes == nil {
		g.axes = []string{"x", "y", "z", "w"}[:d]
	}
	if len(g.axes) != d {
		return nil, inputErr("Options.Axes", -1, "%d names for %d axes", len(g.axes), d)
	}
	for i := range o.Pyramid {
		p := &o.Pyramid[i]
		if !(p.Coarsen >= 1) || math.IsInf(p.Coarsen, 0) {
			return nil, inputErr("Options.Pyramid", i, "coarsen factor %v < 1", p.Coarsen)
		}
		if p.Sparsity != 0 && (!(p.Sparsity >= 1) || math.IsInf(p.Sparsity, 0)) {
			return nil, inputErr("Options.Pyramid", i, "sparsity factor %v < 1", p.Sparsity)
		}
		if p.ChunkScale < 0 || p.ChunkScale > 1<<20 {
			return nil, inputErr("Options.Pyramid", i, "chunk scale %d out of range", p.ChunkScale)
		}
	}
	return g, nil
}

// chunkOfBin maps a bin coordinate to its chunk (floor division by bins per
// chunk), and returns the row-major local bin index inside that chunk.
func (g *geom) chunkOfBin(b coords) (coords, int64) {
	var c coords
	var f int64
	for i := range g.d {
		c[i] = floorDiv(b[i], g.bpc[i])
		f = f*g.bpc[i] + (b[i] - c[i]*g.bpc[i])
	}
	return c, f
}

// run builds level 0 via build, derives the pyramid, writes everything and
// finally the root metadata.
func run(ctx context.Context, w storage.Writer, prefix string, o *Options, g *geom, l0 *level) (sum *Summary, err error) {
	s, err := newStoreWriter(ctx, w, prefix, g.d, o)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := s.close(); cerr != nil && err == nil {
			sum, err = nil, cerr
		}
	}()
	l0.index = 0
	l0.d = g.d
	if l0.codec == nil {
		l0.codec = s.user
		l0.style = styleOf(s.user)
	}
	if l0.auxCodec == nil {
		l0.auxCodec, l0.auxStyle = l0.codec, l0.style
	}
	if l0.auxUnbatched {
		l0.auxCodec, l0.auxStyle = s.zstd, stylePretty
	}
	l0.meta = obj{{"level", 0}, {"object_sparsity", 1.0}, {"vertex_count", l0.vertexCount()},
		{"coarsening_method", "none"}, {"parent_level", jsonNull{}}, {"arrays_present", l0.arraysPresent(g)}}
	levels := []*level{l0}
	sum = &Summary{}
	s.writeLevel(l0)
	caps := []string{}
	pyr := newPyramid(s, g, o, l0)
	for i := range o.Pyramid {
		nl, err := pyr.next(i)
		if err != nil {
			// Let scheduled writes finish before returning.
			return nil, errors.Join(err, s.wait())
		}
		levels = append(levels, nl)
	}
	if len(o.Pyramid) > 0 {
		if l0.hasObjects {
			caps = append(caps, "preserved_object_ids")
		}
		caps = append(caps, "shared_fragments", "multiscale_links")
	}
	if err := s.wait(); err != nil {
		return nil, err
	}
	for _, fn := range s.after {
		if err := fn(ctx); err != nil {
			return nil, err
		}
	}
	s.group("", stylePretty, g.rootAttrs(caps, o, len(o.Pyramid) > 0))
	if err := s.flushGroups(ctx); err != nil {
		return nil, err
	}
	for _, l := range levels {
		ls := LevelSummary{Level: l.index, VertexCount: l.vertexCount(), ChunkCount: len(l.chunks)}
		if l.hasObjects {
			ls.ObjectCount = len(l.manifests)
		}
		sum.Levels = append(sum.Levels, ls)
	}
	return sum, nil
}

func styleOf(c *blobCodec) nodeStyle {
	if c.compact {
		return styleCompact
	}
	return stylePretty
}

// arraysPresent is the informational list the reference stamps on level 0.
func (l *level) arraysPresent(g *geom) []string {
	switch g.geometry {
	case "point_cloud":
		out := []string{"vertices"}
		if len(l.vattrs) > 0 {
			out = append(out, "vertex_attributes")
		}
		if l.hasObjects {
			out = append(out, "object_index")
		}
		return out
	case "streamline", "polyline":
		return []string{"vertices", "object_index"}
	}
	return []string{"vertices", "links", "object_index"}
}

// rootAttrs builds the root group attributes (§1.2), key order as written
// by the reference.
func (g *geom) rootAttrs(caps []string, o *Options, pyramid bool) obj {
	zv := obj{{"zv_version", "0.7.0"}, {"format_capabilities", caps}, {"chunk_shape", g.chunk},
		{"bounds", []any{g.bounds[0], g.bounds[1]}}, {"geometry_types", []string{g.geometry}}}
	if g.hasBinShape {
		zv = append(zv, kv{"base_bin_shape", g.bin})
	}
	zv = append(zv, kv{"links_convention", g.linksConv}, kv{"object_index_convention", "standard"},
		kv{"cross_chunk_strategy", "explicit_links"})
	if pyramid {
		zv = append(zv, kv{"cross_level_depth", 1}, kv{"cross_level_storage", "explicit"})
	}
	axes := make([]any, g.d)
	for i, a := range g.axes {
		ax := obj{{"name", a}, {"type", "space"}}
		if o.Unit != "" {
			ax = append(ax, kv{"unit", o.Unit})
		}
		axes[i] = ax
	}
	ds := []any{g.dataset(0, 1)}
	for i := range o.Pyramid {
		ds = append(ds, g.dataset(i+1, o.Pyramid[i].Coarsen))
	}
	ms := obj{{"version", "0.4"}, {"name", "default"}, {"axes", axes}, {"datasets", ds},
		{"metadata", obj{{"format", "zarr_vectors"}}}}
	return obj{{"zarr_vectors", zv}, {"multiscales", []any{ms}}}
}

// dataset is one NGFF multiscales entry: scale = bin ratio, translation =
// half the level's bin (informational only, §9.3).
func (g *geom) dataset(lvl int, coarsen float64) obj {
	scale := make([]float64, g.d)
	tr := make([]float64, g.d)
	for i := range g.d {
		scale[i] = max(1, math.Round(coarsen))
		tr[i] = g.bin[i] * coarsen / 2
		if lvl == 0 {
			scale[i] = 1
			tr[i] = g.bin[i] / 2
		}
	}
	return obj{{"path", strconv.Itoa(lvl)}, {"coordinateTransformations", []any{
		obj{{"type", "scale"}, {"scale", scale}}, obj{{"type", "translation"}, {"translation", tr}}}}}
}
