package neuroglancer

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/zvfserve/zvfserve/zvf"
)

// kind is what one annotation stands for.
type kind int

const (
	kindPoint    kind = iota // a vertex of a point cloud
	kindPolyline             // a whole polyline (streamline) object
	kindLine                 // one edge: a graph's, or a polyline's segment
)

func (k kind) annotationType() string {
	return [...]string{"point", "polyline", "line"}[k]
}

// geometryBytes is the fixed geometry of a record, counted against the
// property budget (a polyline's varies, and counts nothing).
func (k kind) geometryBytes(rank int) int {
	return [...]int{4 * rank, 0, 8 * rank}[k]
}

// salt separates the hash streams of the kinds, so that a point and a line
// with equal ids are sampled independently.
func (k kind) salt() uint64 {
	return [...]uint64{0x5a56_4650_6f69_6e74, 0x5a56_4650_6f6c_796c, 0x5a56_464c_696e_6573}[k]
}

// plan is the spatial index of one annotation source: the grid, the
// spatial levels (coarse to fine) and which annotations each cell holds.
// It is built once per store version from level 0 (every chunk, or every
// object's manifest, is read) and cached.
//
// Each ZVF level z gives a spatial level whose cells are m_z level-0
// chunks a side (m_z: the level's bin and chunk coarsening relative to
// level 0, as a power of two), so a cell is served from whole level-0
// chunks. An annotation belongs to exactly one spatial level: in hash
// mode, the coarsest whose cumulative share V_z/V_0 (the ZVF level's
// vertex count over level 0's) exceeds a hash of the annotation id; in
// subset mode (polylines over coarse levels that keep a subset of the
// objects with their ids), the coarsest ZVF level that holds the object.
// Coarse ZVF levels are metavertices, not level-0 vertices, so their
// vertices are never served themselves: they set how many level-0
// annotations each level of detail draws.
type plan struct {
	kind   kind
	store  string
	level0 *zvf.Level
	rank   int
	off    int // key coordinates before the spatial ones (attribute-chunked levels)
	keys   []zvf.Key
	k0     []int64   // lowest chunk coordinates
	ext    []int64   // chunks per axis
	cs     []float64 // level-0 chunk shape
	levels []*spatialLevel
	subset bool
	// relate: level 0 has objects, and each annotation names its own in
	// the source's relationship (see relationshipID).
	relate bool
	props  []prop
	notes  []note
	attrs  []string // vertex or object attributes the properties read (nil: none)
	lattrs []string // link attributes a line source's properties read (nil: none)
	total  int64    // distinct annotations
	// point sources
	first []int64 // dense id of each chunk's first row; len(keys)+1
	// object sources
	objects []planObject
	// objectIndex finds an object by id where ids do not ascend with
	// manifest rows (an index by id, ZVF 0.9.2); nil: binary search.
	objectIndex map[int64]int32
	edgeFirst   []int64 // line sources: dense id of each object's first edge; len(objects)+1
	size        int64   // bytes, for the cache
	// cellAim is what a coarse cell may hold (hash mode), in vertices
	// (a point or an edge counting one): an eighth of the cell bound; 0:
	// no aim.
	cellAim float64

	// ordinal is the index in keys of each chunk (by its key's string).
	ordinal map[string]int32
}

type spatialLevel struct {
	zvf   int     // the ZVF level it stands for
	share float64 // hash mode: share of annotations in this and coarser levels
	// zvfShare is the share the ZVF level's vertex count gives, which
	// fillForViews may raise; zvfVertices that count.
	zvfShare    float64
	zvfVertices int64
	mult        []int64   // level-0 chunks per cell, per axis
	shape       []int64   // grid_shape
	size        []float64 // chunk_size
	limit       int64
	count       int64 // annotations in the level (one in several cells counts once)
	cells       map[string]*cell
	ofKey       []string // the cell of each level-0 chunk
	chosen      string   // how its annotations are chosen, for the info's notes
}

type cell struct {
	count   int64
	chunks  []int32 // point sources: level-0 chunks whose rows may be here
	objects []int32 // object sources: indexes into plan.objects
}

type planObject struct {
	id     int64
	chunks []int32 // level-0 chunk of each vertex, in the object's vertex order
	level  int     // polylines: the spatial level
	// cross lists the level-0 chunks each segment (a line source's edge,
	// a polyline's pair of consecutive vertices) passes through between
	// its ends' chunks: records of the segment's index, then the chunk's
	// coordinates, in segment order (walkChunks).
	cross []int64
}

// readConcurrency bounds the level-0 reads of a plan.
const readConcurrency = 8

// buildPlan builds the spatial index of st's source of kind k, whose cells
// a server answers up to maxCell annotations each (0: no bound).
func buildPlan(ctx context.Context, st *zvf.Store, k kind, maxCell int64) (*plan, error) {
	l0, err := st.Level(0)
	if err != nil {
		return nil, err
	}
	// The index files every listed chunk: one the listing lacks would be
	// missing from its cells without a word.
	if err := l0.CheckListed(ctx); err != nil {
		return nil, err
	}
	info := st.Info()
	p := &plan{kind: k, store: st.Name(), level0: l0, rank: info.Dims, keys: l0.Keys(), cs: l0.Info().ChunkShape}
	p.ordinal = make(map[string]int32, len(p.keys))
	for c, key := range p.keys {
		p.ordinal[key.String()] = int32(c)
	}
	p.size += 64 * int64(len(p.keys))
	p.grid()
	p.chooseLevels(st, maxCell)
	fits := false
	if l0.Info().ObjectCount > 0 {
		p.relate = true
		if fits, err = objectIDsFit(ctx, l0); err != nil {
			return nil, err
		}
	}
	p.props, p.notes = propsFor(k, l0, k.geometryBytes(p.rank), fits)
	if p.relate && !fits {
		p.notes = append(p.notes, note{Attribute: "object id", Note: fmt.Sprintf(
			"no object_id property: some object ids are outside 0…%d, what an int32 property holds; the relationship %q carries every id", math.MaxInt32, relationshipID)})
	}
	for _, pr := range p.props {
		if pr.attr != "" && !containsString(p.attrs, pr.attr) && (pr.from == fromVertex || pr.from == fromMean) {
			p.attrs = append(p.attrs, pr.attr)
		}
		if pr.from == fromEdge && !containsString(p.lattrs, pr.attr) {
			p.lattrs = append(p.lattrs, pr.attr)
		}
	}
	switch k {
	case kindPoint:
		err = p.assignPoints(ctx)
	default:
		err = p.assignObjects(ctx, st)
	}
	if err != nil {
		return nil, err
	}
	p.finish()
	return p, nil
}

// objectIDsFit reports whether every object id of level 0 fits the int32
// object_id property with -1 left for "no object": 0 ≤ id ≤ MaxInt32.
func objectIDsFit(ctx context.Context, l0 *zvf.Level) (bool, error) {
	n := l0.Info().ObjectCount
	if l0.Info().ObjectIndexLayout != "vlen_manifests_v2" {
		return n-1 <= math.MaxInt32, nil // the ids are the manifest rows 0 … n-1
	}
	// object_ids holds n ids (the reader checks its shape): read, not
	// taken on the metadata's word.
	for row := range n {
		id, err := l0.ObjectIDAt(ctx, row)
		if err != nil {
			return false, err
		}
		if id < 0 || id > math.MaxInt32 {
			return false, nil
		}
	}
	return true, nil
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// grid sets the level-0 chunk grid the cells are made of.
func (p *plan) grid() {
	p.k0, p.ext = make([]int64, p.rank), make([]int64, p.rank)
	if len(p.keys) == 0 {
		for i := range p.ext {
			p.ext[i] = 1
		}
		return
	}
	p.off = len(p.keys[0]) - p.rank
	hi := make([]int64, p.rank)
	for i := range p.rank {
		p.k0[i], hi[i] = math.MaxInt64, math.MinInt64
	}
	for _, key := range p.keys {
		for i := range p.rank {
			p.k0[i] = min(p.k0[i], key[p.off+i])
			hi[i] = max(hi[i], key[p.off+i])
		}
	}
	for i := range p.rank {
		p.ext[i] = hi[i] - p.k0[i] + 1
	}
}

// bounds are the source's corners: the grid's origin (every spatial
// level's cells start there) and the upper corner of the data, the
// store's declared bounds where they lie inside the grid, else the grid's
// chunk-aligned corner, which covers every vertex.
func (p *plan) bounds(upper []float64) (lo, hi []float64) {
	lo, hi = make([]float64, p.rank), make([]float64, p.rank)
	for i := range p.rank {
		lo[i] = float64(p.k0[i]) * p.cs[i]
		hi[i] = float64(p.k0[i]+p.ext[i]) * p.cs[i]
		if len(upper) == p.rank && upper[i] > lo[i] && upper[i] < hi[i] {
			hi[i] = upper[i]
		}
	}
	return lo, hi
}

// pow2 rounds r ≥ 1 to the nearest power of two.
func pow2(r float64) int64 {
	if !(r > 1) || math.IsInf(r, 0) {
		return 1
	}
	return 1 << min(62, int(math.Round(math.Log2(r))))
}

// pow2Ceil is the least power of two ≥ n.
func pow2Ceil(n int64) int64 {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len64(uint64(n-1))
}

// chooseLevels makes one spatial level per ZVF level that thins level 0
// out further than the finer ones (see plan).
func (p *plan) chooseLevels(st *zvf.Store, maxCell int64) {
	infos := st.Info().Levels
	base := infos[0]
	if p.kind == kindPolyline && len(infos) > 1 {
		p.subset = true
		for _, li := range infos[1:] {
			if !li.PreservesObjectIDs || !(li.ObjectSparsity > 0 && li.ObjectSparsity < 1) {
				p.subset = false
			}
		}
	}
	var fine []*spatialLevel // finest first
	prevMult := make([]int64, p.rank)
	for i := range prevMult {
		prevMult[i] = 1
	}
	for _, li := range infos {
		share := 1.0
		if li.Level != base.Level {
			if base.VertexCount <= 0 || len(li.BinShape) != p.rank || len(li.ChunkShape) != p.rank {
				continue
			}
			share = float64(li.VertexCount) / float64(base.VertexCount)
			if !p.subset && !(share > 0 && share < fine[len(fine)-1].share) {
				continue // thins out nothing further
			}
		}
		mult := make([]int64, p.rank)
		for i := range mult {
			r := 1.0
			if li.Level != base.Level {
				r = max(li.BinShape[i]/base.BinShape[i], li.ChunkShape[i]/p.cs[i])
			}
			mult[i] = min(max(pow2(r), prevMult[i]), pow2Ceil(p.ext[i]))
		}
		prevMult = mult
		sl := &spatialLevel{zvf: li.Level, share: share, zvfShare: share, zvfVertices: li.VertexCount, mult: mult, cells: map[string]*cell{}}
		switch {
		case li.Level == base.Level:
			sl.chosen = "every level-0 annotation no coarser level holds"
		case p.subset:
			sl.chosen = fmt.Sprintf("the objects ZVF level %d holds (object_sparsity %g), first seen at this level", li.Level, li.ObjectSparsity)
		default:
			sl.chosen = fmt.Sprintf("level-0 annotations sampled by a hash of their id: %.6g of them up to this level (ZVF level %d's %d vertices over level 0's %d)",
				share, li.Level, li.VertexCount, base.VertexCount)
		}
		fine = append(fine, sl)
	}
	for i := len(fine) - 1; i >= 0; i-- {
		p.levels = append(p.levels, fine[i])
	}
	for _, sl := range p.levels {
		sl.shape, sl.size = make([]int64, p.rank), make([]float64, p.rank)
		for i := range p.rank {
			sl.shape[i] = (p.ext[i] + sl.mult[i] - 1) / sl.mult[i]
			sl.size[i] = float64(sl.mult[i]) * p.cs[i]
		}
		sl.ofKey = make([]string, len(p.keys))
		var b []byte
		for c, key := range p.keys {
			b = b[:0]
			for i := range p.rank {
				if i > 0 {
					b = append(b, '_')
				}
				b = strconv.AppendInt(b, (key[p.off+i]-p.k0[i])/sl.mult[i], 10)
			}
			sl.ofKey[c] = string(b)
		}
	}
	if !p.subset {
		n, each := base.VertexCount, 1.0 // points; about a graph's edges
		if p.kind == kindPolyline && base.ObjectCount > 0 {
			// A polyline is one annotation of all its vertices, which a
			// cell's bound counts.
			n, each = base.ObjectCount, max(float64(base.VertexCount)/float64(base.ObjectCount), 1)
		}
		p.fillForViews(n, each, st.Info().Bounds[1], maxCell)
		if maxCell > 0 {
			p.cellAim = float64(maxCell) / 8
		}
	}
}

// ngViewAnnotations is about how many annotations Neuroglancer draws in
// a view: the panel's pixels over the square of its annotation
// resolution target (8 px by default), here for a 3-D panel of 1920 ×
// 1080 (32,400). A smaller panel draws a part of each cell's list.
const ngViewAnnotations = 1 << 15

// fillForViews raises the share of each coarse level (hash mode, about n
// annotations) to what a view of its cells wants. Neuroglancer fetches
// levels from the coarsest down until their annotations, counted as
// limit per cell, reach ngViewAnnotations in the view, and fetches every
// visible cell of the last one whole to draw a prefix of each: a
// coarse level sparser than a view wants (a pyramid of few metavertices)
// makes a view of the whole box fetch all of a fine level to draw a
// sliver of it. So the coarsest level holds at least ngViewAnnotations
// over the box (more where its grid overhangs the data, as Neuroglancer
// counts limit over whole cells), and each finer level, whose cells a
// view that many times smaller shows, that many times more: a view
// fetches the level it needs, and draws a good part of what it fetches.
// The store's own pyramid still decides where it is denser. A cell is
// aimed at no more than an eighth of maxCell (the server's --max-vertices,
// past which a cell is refused) in vertices, an annotation counting each
// of them (a polyline's mean), nor eight times what a view wants of it,
// however thin the data are in the grid, so that uneven data still fit.
func (p *plan) fillForViews(n int64, each float64, upper []float64, maxCell int64) {
	if n <= 0 || len(p.levels) < 2 {
		return
	}
	lo, hi := p.bounds(upper)
	c0 := p.levels[0]
	overhang, cells0 := 1.0, 1.0
	for i := range p.rank {
		if ext := hi[i] - lo[i]; ext > 0 {
			overhang *= float64(c0.shape[i]) * c0.size[i] / ext
		}
		cells0 *= float64(c0.shape[i])
	}
	perCell := ngViewAnnotations * min(overhang, 8) / cells0
	if maxCell > 0 {
		perCell = min(perCell, float64(maxCell)/8/each)
	}
	// From the finest coarse level up, so that each holds at most half of
	// what the level below it does: levels stay levels (a view zoomed in
	// reads fine cells, not a coarse one whole), however few the
	// annotations.
	for s := len(p.levels) - 2; s >= 0; s-- {
		l := p.levels[s]
		cells := 1.0
		for _, v := range l.shape {
			cells *= float64(v)
		}
		if want := min(perCell*cells/float64(n), p.levels[s+1].share/2); want > l.share {
			l.share = want
			l.chosen = fmt.Sprintf("level-0 annotations sampled by a hash of their id: %.6g of them up to this level, about %.0f a cell, what a Neuroglancer view of its cells draws (ZVF level %d's %d vertices would give %.6g)",
				want, perCell, l.zvf, l.zvfVertices, l.zvfShare)
		}
	}
}

// capByFullest lowers the share of each coarse level (hash mode) so that
// its fullest cell holds about cellAim vertices at most: fillForViews
// aims at a view's worth a cell as if the data were spread evenly over
// the grid, and the store's pyramid thins every cell alike, so dense
// parts of uneven data (nine points in ten in a hundredth of the box)
// would put many times the aim in one cell, past the cell bound itself.
// fullest[s] is the most level-0 vertices a cell of level s's grid
// holds; a level holds the band of shares above the coarser level's, as
// the format's own rule emits limit/maxCount of what is left. A cell's
// annotations are a hash sample, so the aim is lowered by three standard
// deviations to leave room for the draw.
func (p *plan) capByFullest(fullest []int64) {
	if p.subset || p.cellAim <= 0 {
		return
	}
	target := max(p.cellAim-3*math.Sqrt(p.cellAim), p.cellAim/2)
	below := 0.0 // the share of the coarser levels
	for s, l := range p.levels[:len(p.levels)-1] {
		if fullest[s] > 0 {
			if c := below + target/float64(fullest[s]); c < l.share {
				l.share = c
				l.chosen = fmt.Sprintf("level-0 annotations sampled by a hash of their id: %.6g of them up to this level, so that its fullest cell (%d level-0 vertices) holds about %.0f, an eighth of the cell bound less room for the draw (ZVF level %d's %d vertices would give %.6g)",
					c, fullest[s], target, l.zvf, l.zvfVertices, l.zvfShare)
			}
		}
		below = l.share
	}
}

// capping reports whether capByFullest may lower a level's share.
func (p *plan) capping() bool { return !p.subset && p.cellAim > 0 && len(p.levels) > 1 }

// mix is SplitMix64's finaliser: a bijective, well-mixed hash of an id.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// levelOf is the spatial level of annotation id in hash mode.
func (p *plan) levelOf(id int64) int {
	u := float64(mix(uint64(id)^p.kind.salt())>>11) / (1 << 53)
	for s, l := range p.levels {
		if u < l.share {
			return s
		}
	}
	return len(p.levels) - 1
}

func (l *spatialLevel) cellAt(key string) *cell {
	c := l.cells[key]
	if c == nil {
		c = &cell{}
		l.cells[key] = c
	}
	return c
}

// assignPoints reads every level-0 chunk's row count, numbers the rows
// densely in chunk-key order, and files each row in its chunk's cell at
// its level.
func (p *plan) assignPoints(ctx context.Context) error {
	rows := make([]int64, len(p.keys))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readConcurrency)
	for c, key := range p.keys {
		g.Go(func() error {
			t, err := p.level0.Chunk(gctx, key, nil)
			if err != nil {
				return err
			}
			rows[c] = int64(t.Rows)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if p.capping() {
		fullest := make([]int64, len(p.levels))
		for s, l := range p.levels[:len(p.levels)-1] {
			sum := map[string]int64{}
			for c, key := range l.ofKey {
				sum[key] += rows[c]
				fullest[s] = max(fullest[s], sum[key])
			}
		}
		p.capByFullest(fullest)
	}
	p.first = make([]int64, len(p.keys)+1)
	counts := make([]int64, len(p.levels))
	for c := range p.keys {
		p.first[c+1] = p.first[c] + rows[c]
		clear(counts)
		for id := p.first[c]; id < p.first[c+1]; id++ {
			counts[p.levelOf(id)]++
		}
		for s, n := range counts {
			if n > 0 {
				p.levels[s].count += n
				cl := p.levels[s].cellAt(p.levels[s].ofKey[c])
				cl.count += n
				cl.chunks = append(cl.chunks, int32(c))
			}
		}
	}
	p.total = p.first[len(p.keys)]
	p.size += 8 * int64(len(p.first))
	return nil
}

// assignObjects reads every object's level-0 manifest (and, for lines, its
// edges), numbers the edges densely in object order, and files each
// annotation in every cell of its level that holds one of its vertices.
func (p *plan) assignObjects(ctx context.Context, st *zvf.Store) error {
	n := p.level0.Info().ObjectCount
	var present []*zvf.Level // subset mode: the coarse levels, coarsest first
	if p.subset {
		for s := 0; s < len(p.levels)-1; s++ {
			l, err := st.Level(p.levels[s].zvf)
			if err != nil {
				return err
			}
			present = append(present, l)
		}
	}
	p.edgeFirst = []int64{0}
	// Objects are read a batch at a time in id order, so equal stores
	// give equal plans and memory follows what was read, not the object
	// count the metadata claims. They are filed once all are read, when
	// the fullest cell of each level's grid is known (capByFullest).
	var edges [][]int64 // line sources: each object's edges, until filed
	reads := make([]objectRead, objectBatch)
	for start := int64(0); start < n; start += objectBatch {
		end := min(n, start+objectBatch)
		if err := p.readObjects(ctx, start, reads[:end-start]); err != nil {
			return err
		}
		for _, r := range reads[:end-start] {
			if r.chunks == nil {
				continue
			}
			p.objects = append(p.objects, planObject{id: r.id, chunks: r.chunks, cross: r.cross})
			p.size += 4*int64(len(r.chunks)) + 8*int64(len(r.cross)) + 64
			if p.kind == kindLine {
				edges = append(edges, r.edges)
			}
		}
	}
	if p.capping() {
		p.capByFullest(p.objectFullest(edges))
	}
	for i := range p.objects {
		var e []int64
		if p.kind == kindLine {
			e, edges[i] = edges[i], nil
		}
		if err := p.file(ctx, int32(i), e, present); err != nil {
			return err
		}
	}
	if !slices.IsSortedFunc(p.objects, func(a, b planObject) int { return cmp.Compare(a.id, b.id) }) {
		p.objectIndex = make(map[int64]int32, len(p.objects))
		for i := range p.objects {
			p.objectIndex[p.objects[i].id] = int32(i)
		}
		p.size += 16 * int64(len(p.objects))
	}
	return nil
}

// objectNamed is the index in p.objects of object id.
func (p *plan) objectNamed(id int64) (int, bool) {
	if p.objectIndex != nil {
		i, ok := p.objectIndex[id]
		return int(i), ok
	}
	i := sort.Search(len(p.objects), func(i int) bool { return p.objects[i].id >= id })
	return i, i < len(p.objects) && p.objects[i].id == id
}

// objectBatch is how many objects a plan reads at a time.
const objectBatch = 4096

type objectRead struct {
	id     int64 // the object of the manifest row read
	chunks []int32
	edges  []int64
	cross  []int64 // see planObject
}

// readObjects reads the manifests (and, for lines, the edges; for lines
// and polylines whose segments may cross a third chunk, the vertices, to
// walk them) of the objects in manifest rows start, start+1, … into reads
// (ids are the rows unless the store's index names objects by id).
func (p *plan) readObjects(ctx context.Context, start int64, reads []objectRead) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readConcurrency)
	for j := range reads {
		row := start + int64(j)
		reads[j] = objectRead{}
		g.Go(func() error {
			id, err := p.level0.ObjectIDAt(gctx, row)
			if err != nil {
				return err
			}
			reads[j].id = id
			m, err := p.level0.Manifest(gctx, id)
			if err != nil {
				return err
			}
			var chunks []int32
			for _, b := range m.Blocks {
				c, ok := p.ordinal[b.Chunk.String()]
				if !ok {
					return corruptf("store %q level 0: object %d names chunk %s, which does not exist", p.store, id, b.Chunk)
				}
				for _, f := range b.Fragments {
					for range f.Count {
						chunks = append(chunks, c)
					}
				}
			}
			if len(chunks) == 0 {
				return nil
			}
			reads[j].chunks = chunks
			// A line source's edges are read, and a polyline's vertices
			// where two consecutive ones are chunks apart, to walk the
			// chunks their segments pass through.
			if p.kind == kindPolyline && !p.polylineFar(chunks) {
				return nil
			}
			// A polyline's edges are its vertex order: the wire form
			// spares building them as a list.
			o, err := p.level0.ObjectWith(gctx, id, zvf.ObjectQuery{Wire: p.kind == kindPolyline})
			if err != nil {
				return err
			}
			if o.Count != int64(len(chunks)) {
				return corruptf("store %q level 0: object %d has %d vertices and a manifest of %d rows", p.store, id, o.Count, len(chunks))
			}
			if p.kind == kindPolyline {
				for v := int64(1); v < o.Count; v++ {
					reads[j].cross = p.segmentCrossings(reads[j].cross, v-1, &o.Vertices, chunks, v-1, v)
				}
				return nil
			}
			for e := range int64(len(o.Edges) / 2) {
				a, b := o.Edges[2*e], o.Edges[2*e+1]
				if a < 0 || a >= o.Count || b < 0 || b >= o.Count {
					return corruptf("store %q level 0: object %d has an edge %d–%d of its %d vertices", p.store, id, a, b, o.Count)
				}
				reads[j].cross = p.segmentCrossings(reads[j].cross, e, &o.Vertices, chunks, a, b)
			}
			reads[j].edges = o.Edges
			return nil
		})
	}
	return g.Wait()
}

// objectFullest is, for each coarse level, the most level-0 vertices a
// cell of its grid holds: a polyline's every vertex in each cell it
// passes through, an edge one in each cell it passes through (what
// checkSize counts).
func (p *plan) objectFullest(edges [][]int64) []int64 {
	fullest := make([]int64, len(p.levels))
	type tally struct {
		n    int64
		last int32 // the last polyline counted
	}
	for s, l := range p.levels[:len(p.levels)-1] {
		cells := map[string]*tally{}
		add := func(key string, i int32, n int64) {
			t := cells[key]
			if t == nil {
				t = &tally{last: -1}
				cells[key] = t
			}
			if p.kind == kindPolyline {
				if t.last == i {
					return
				}
				t.last = i
			}
			t.n += n
			fullest[s] = max(fullest[s], t.n)
		}
		for i := range p.objects {
			o := &p.objects[i]
			at := 0
			if p.kind == kindPolyline {
				n := int64(len(o.chunks))
				p.polylineCells(l, o, func(key string) { add(key, int32(i), n) })
				continue
			}
			e := edges[i]
			for k := 0; k+1 < len(e); k += 2 {
				ka, kb := l.ofKey[o.chunks[e[k]]], l.ofKey[o.chunks[e[k+1]]]
				p.segmentCells(l, o, int64(k/2), ka, kb, &at, func(key string) { add(key, int32(i), 1) })
			}
		}
	}
	return fullest
}

// file adds the annotations of object i (with its edges, for lines) to
// the cells they fall in.
func (p *plan) file(ctx context.Context, i int32, edges []int64, present []*zvf.Level) error {
	o := &p.objects[i]
	switch p.kind {
	case kindPolyline:
		o.level = len(p.levels) - 1
		if p.subset {
			for s, l := range present {
				has, err := l.HasObject(ctx, o.id)
				if err != nil {
					return err
				}
				if has {
					o.level = s
					break
				}
			}
		} else {
			o.level = p.levelOf(o.id)
		}
		sl := p.levels[o.level]
		sl.count++
		p.polylineCells(sl, o, func(key string) {
			cl := sl.cellAt(key)
			if len(cl.objects) > 0 && cl.objects[len(cl.objects)-1] == i {
				return
			}
			cl.count++
			cl.objects = append(cl.objects, i)
		})
		p.total++
	case kindLine:
		ne := int64(len(edges) / 2)
		base := p.edgeFirst[len(p.edgeFirst)-1]
		at := 0
		for e := range ne {
			sl := p.levels[p.levelOf(base+e)]
			sl.count++
			ka, kb := sl.ofKey[o.chunks[edges[2*e]]], sl.ofKey[o.chunks[edges[2*e+1]]]
			p.segmentCells(sl, o, e, ka, kb, &at, func(key string) {
				cl := sl.cellAt(key)
				cl.count++
				if len(cl.objects) == 0 || cl.objects[len(cl.objects)-1] != i {
					cl.objects = append(cl.objects, i)
				}
			})
		}
		p.edgeFirst = append(p.edgeFirst, base+ne)
		p.total += ne
	}
	return nil
}

// finish sets each level's limit to its fullest cell and drops levels
// that hold nothing (each would cost a request per visible cell).
func (p *plan) finish() {
	kept := p.levels[:0]
	remap := make([]int, len(p.levels))
	for s, l := range p.levels {
		for _, c := range l.cells {
			l.limit = max(l.limit, c.count)
			p.size += 48 + 4*int64(len(c.chunks)+len(c.objects))
		}
		p.size += 16 * int64(len(l.ofKey))
		remap[s] = len(kept)
		if l.count > 0 || (s == len(p.levels)-1 && len(kept) == 0) {
			l.limit = max(l.limit, 1)
			kept = append(kept, l)
		}
	}
	p.levels = kept
	for i := range p.objects {
		p.objects[i].level = remap[p.objects[i].level]
	}
}

// levelKey parses a spatial level name's number ("spatial3" → 3).
func (p *plan) level(name string) (int, *spatialLevel, bool) {
	n, err := strconv.Atoi(name)
	if err != nil || n < 0 || n >= len(p.levels) || strconv.Itoa(n) != name {
		return 0, nil, false
	}
	return n, p.levels[n], true
}

// cellKey checks a cell name ("i_j_k", one canonical non-negative integer
// per axis) against the level's grid.
func (p *plan) cellKey(l *spatialLevel, name string) (string, error) {
	parts := strings.Split(name, "_")
	if len(parts) != p.rank {
		return "", badParam(fmt.Sprintf("cell %q: give %d cell coordinates joined by _", name, p.rank))
	}
	for i, s := range parts {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || strconv.FormatInt(v, 10) != s {
			return "", badParam(fmt.Sprintf("cell %q: coordinate %q is not an integer", name, s))
		}
		if v < 0 || v >= l.shape[i] {
			return "", notFoundf("cell %s is outside the grid %v", name, l.shape)
		}
	}
	return name, nil
}
