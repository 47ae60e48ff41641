package neuroglancer

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"

	"github.com/go-chi/chi/v5"

	"github.com/zvfserve/zvfserve/api/neuroglancer/draco"
	"github.com/zvfserve/zvfserve/zvf"
)

// The multilod source serves a mesh store as Neuroglancer's
// neuroglancer_multilod_draco: per segment a manifest ({id}.index) and a
// data file ({id}) of Draco fragments that Neuroglancer reads by Range.
// Each ZVF level that holds the objects is one level of detail:
//
//   - LOD 0 is the object's level-0 faces, exactly (each polygon as a fan,
//     winding kept), in one node spanning the segment's bounding box: a
//     node must hold whole triangles at LOD 0, so it cannot be smaller
//     than the box without clipping them.
//   - LOD z > 0 takes its vertices from ZVF level z. Where level z has
//     faces for the object (a store written with simplified meshes) and
//     no more of them than LOD z−1 has triangles, they are the LOD.
//     Otherwise (the reference pyramid keeps only metavertices, no faces)
//     every vertex of LOD z−1 moves to the nearest vertex of the object
//     at level z and LOD z−1's triangles follow; triangles that collapse
//     (two corners on one vertex) or repeat one already kept are dropped.
//     So a segment's triangle count never grows from one LOD to the next.
//     An object level z does not hold has an empty LOD z and above.
//   - The grid's origin is the low corner of the box around every LOD's
//     vertices and its chunk_shape that box's size, so LOD z's single
//     node (at position 0, 0, 0) spans 2^z boxes: every LOD's geometry
//     lies in the node's lower octant and no triangle crosses the 2×2×2
//     split Neuroglancer makes of a node at LOD > 0 (it assigns a corner
//     on the split plane to either side). Each node is the parent of the
//     one below, so Neuroglancer reaches every LOD.
//   - lod_scales are each level's bin size (its largest axis), the scale
//     at which the level merges vertices, made strictly increasing;
//     Neuroglancer draws the coarsest LOD whose scale is under its target
//     (1 pixel by default).

// multilodBits is the info's vertex_quantization_bits: 16, so an LOD-0
// vertex is within 1/65535 of the segment's box of where the store has it
// (10 bits would move vertices of a large object by a visible fraction).
const multilodBits = 16

// multilodSegment is one object's answer: its manifest and its data file.
type multilodSegment struct {
	index []byte
	data  []byte
}

// lodMesh is one level of detail of an object: x, y, z per vertex in store
// units, and three vertex indices per triangle.
type lodMesh struct {
	pos  []float64
	tris []uint32
}

func (m *lodMesh) triangles() int { return len(m.tris) / 3 }

// multilodLevels are the store's levels that become LODs: level 0 and each
// next level as long as it keeps level 0's object ids (preserves_object_ids,
// with an object index): another level cannot say which of its vertices
// belong to a segment.
func multilodLevels(st *zvf.Store) ([]*zvf.Level, error) {
	var out []*zvf.Level
	for i, n := range st.Levels() {
		l, err := st.Level(n)
		if err != nil {
			return nil, err
		}
		if i > 0 && (l.Info().ObjectCount == 0 || !l.Info().PreservesObjectIDs) {
			break
		}
		out = append(out, l)
	}
	return out, nil
}

// levelScales are the LODs' lod_scales: each level's bin size (its
// largest axis; the chunk's without bins), made strictly increasing.
func levelScales(levels []*zvf.Level) []float32 {
	sizes := make([]float64, len(levels))
	for i, l := range levels {
		shape := l.Info().BinShape
		if len(shape) == 0 {
			shape = l.Info().ChunkShape
		}
		if len(shape) > 0 {
			sizes[i] = slices.Max(shape)
		}
	}
	return lodScales(sizes)
}

// lodScales turns sizes into float32 lod_scales: positive (1 for a size
// that is not), each larger than the one before (the next float32 up when
// a level is no coarser than the one below it).
func lodScales(sizes []float64) []float32 {
	out := make([]float32, len(sizes))
	for i, v := range sizes {
		s := float32(v)
		if !(s > 0) || math.IsInf(float64(s), 0) {
			s = 1
		}
		if i > 0 && s <= out[i-1] {
			s = math.Nextafter32(out[i-1], float32(math.Inf(1)))
		}
		out[i] = s
	}
	return out
}

// multilodInfo is the source's info.
type multilodInfo struct {
	Type              string        `json:"@type"`
	Bits              int           `json:"vertex_quantization_bits"`
	Transform         []float64     `json:"transform"`
	LodScaleMult      float64       `json:"lod_scale_multiplier"`
	SegmentProperties string        `json:"segment_properties,omitempty"`
	ZVF               multilodNotes `json:"zvfserve"`
}

type multilodNotes struct {
	objectNotes
	NanometresPerUnit []float64 `json:"nanometres_per_unit"`
	LODLevels         []int     `json:"lod_levels"`
	LODScales         []float32 `json:"lod_scales"`
}

// multilodInfoJSON is the multilod source's info, naming its segment
// properties at segProps.
func multilodInfoJSON(segProps string, st *zvf.Store, levels []*zvf.Level) ([]byte, error) {
	dims, axisNotes := dimensions(st.Info().Axes)
	nm := nanometresPer(dims)
	inf := multilodInfo{Type: "neuroglancer_multilod_draco", Bits: multilodBits,
		Transform: []float64{nm[0], 0, 0, 0, 0, nm[1], 0, 0, 0, 0, nm[2], 0}, LodScaleMult: 1,
		ZVF: multilodNotes{objectNotes: objectNotes{Store: st.Name(), Attributes: []note{}, Axes: append([]string{}, axisNotes...)},
			NanometresPerUnit: nm, LODScales: levelScales(levels)}}
	for _, l := range levels {
		inf.ZVF.LODLevels = append(inf.ZVF.LODLevels, l.N())
	}
	if levels[0].Info().ObjectCount <= maxSegmentIDs {
		inf.SegmentProperties = segProps
	}
	return json.Marshal(inf)
}

// buildSegment builds object id's manifest and data file from levels (LOD
// z from levels[z]); limit bounds the vertices read from any level.
func buildSegment(ctx context.Context, store string, levels []*zvf.Level, scales []float32, id, limit int64) (*multilodSegment, error) {
	if len(levels) == 0 {
		return nil, notFoundf("store %q has no levels", store)
	}
	l0 := levels[0]
	if err := checkObject(ctx, store, l0, id); err != nil {
		return nil, err
	}
	lods := make([]lodMesh, len(levels))
	for z, l := range levels {
		var err error
		if z == 0 {
			lods[0], err = levelMesh(ctx, store, l, id, limit)
		} else {
			lods[z], err = coarseMesh(ctx, store, l, id, limit, &lods[z-1])
		}
		if err != nil {
			return nil, err
		}
	}
	g, err := newSegmentGrid(store, id, lods)
	if err != nil {
		return nil, err
	}
	var enc draco.Encoder
	var data []byte
	sizes := make([]uint32, len(lods))
	var q []uint32
	for z := range lods {
		if lods[z].triangles() == 0 {
			continue // a zero-size node: Neuroglancer draws nothing there
		}
		q = g.quantize(q[:0], lods[z].pos, z)
		start := len(data)
		if data, err = enc.Append(data, draco.Mesh{Bits: multilodBits, Positions: q, Faces: lods[z].tris}); err != nil {
			return nil, fmt.Errorf("store %q object %d LOD %d: %w", store, id, z, err)
		}
		if len(data)-start > math.MaxUint32 {
			return nil, tooLargef("store %q: object %d's LOD %d takes %d bytes, more than a manifest can say", store, id, z, len(data)-start)
		}
		sizes[z] = uint32(len(data) - start)
	}
	return &multilodSegment{index: g.appendIndex(nil, scales, sizes), data: data}, nil
}

// levelMesh is object id's mesh at level l as the store has it (meshOf).
func levelMesh(ctx context.Context, store string, l *zvf.Level, id, limit int64) (lodMesh, error) {
	o, err := readObject(ctx, store, l, id, limit)
	if err != nil {
		return lodMesh{}, err
	}
	return meshOf(store, l, o)
}

func readObject(ctx context.Context, store string, l *zvf.Level, id, limit int64) (*zvf.Object, error) {
	o, err := l.Object(ctx, id, nil)
	if err != nil {
		return nil, err
	}
	if limit > 0 && o.Count > limit {
		return nil, tooLargef("store %q level %d: object %d has %d vertices, more than this server's %d per response", store, l.N(), id, o.Count, limit)
	}
	return o, nil
}

// meshOf is object o's vertices and its faces as triangles (a polygon as a
// fan), without the vertices no face uses (Draco decoders before 1.5.7
// refuse more than three vertices per face).
func meshOf(store string, l *zvf.Level, o *zvf.Object) (lodMesh, error) {
	w := o.FaceWidth
	var m lodMesh
	if w < 3 {
		return m, nil
	}
	remap := make([]int64, o.Count)
	for i := range remap {
		remap[i] = -1
	}
	m.tris = make([]uint32, 0, len(o.Faces)/w*(w-2)*3)
	for f := 0; f+w <= len(o.Faces); f += w {
		for k := 1; k+1 < w; k++ {
			for _, v := range [3]int64{o.Faces[f], o.Faces[f+k], o.Faces[f+k+1]} {
				if v < 0 || v >= o.Count {
					return lodMesh{}, corruptf("store %q level %d: object %d has a face on vertex %d of %d", store, l.N(), o.ID, v, o.Count)
				}
				if remap[v] < 0 {
					remap[v] = int64(len(m.pos) / 3)
					for a := range 3 {
						m.pos = append(m.pos, o.Vertices.At(3*int(v)+a).Float64())
					}
				}
				m.tris = append(m.tris, uint32(remap[v]))
			}
		}
	}
	return m, nil
}

// coarseMesh is object id's LOD at coarse level l, given the LOD below it
// (see the source's description above).
func coarseMesh(ctx context.Context, store string, l *zvf.Level, id, limit int64, finer *lodMesh) (lodMesh, error) {
	if finer.triangles() == 0 {
		return lodMesh{}, nil
	}
	ok, err := l.HasObject(ctx, id)
	if err != nil || !ok {
		return lodMesh{}, err
	}
	o, err := readObject(ctx, store, l, id, limit)
	if err != nil {
		return lodMesh{}, err
	}
	own, err := meshOf(store, l, o)
	if err != nil {
		return lodMesh{}, err
	}
	// The level's distinct vertices (a manifest may name a shared
	// metavertex more than once).
	var pts []float64
	seen := make(map[[3]float64]bool, o.Count)
	for i := range int(o.Count) {
		p := [3]float64{o.Vertices.At(3 * i).Float64(), o.Vertices.At(3*i + 1).Float64(), o.Vertices.At(3*i + 2).Float64()}
		if !seen[p] {
			seen[p] = true
			pts = append(pts, p[:]...)
		}
	}
	return coarseFrom(&own, pts, finer), nil
}

// coarseFrom is a coarse LOD: the level's own mesh when it has triangles
// and no more than the finer LOD, else the finer LOD clustered onto the
// level's vertices pts.
func coarseFrom(own *lodMesh, pts []float64, finer *lodMesh) lodMesh {
	if own.triangles() > 0 && own.triangles() <= finer.triangles() {
		return *own
	}
	return cluster(finer, pts)
}

// cluster moves every vertex of m to the nearest of pts (x, y, z each) and
// keeps the triangles that stay triangles, each once (a triangle and its
// reverse are two faces), in m's order; the vertices are the points some
// triangle uses, in pts order.
func cluster(m *lodMesh, pts []float64) lodMesh {
	if len(pts) == 0 {
		return lodMesh{}
	}
	idx := newNearestIndex(pts)
	to := make([]int32, len(m.pos)/3)
	for i := range to {
		to[i] = idx.nearest([3]float64{m.pos[3*i], m.pos[3*i+1], m.pos[3*i+2]})
	}
	var tris []int32
	kept := map[[3]int32]bool{}
	for t := 0; t+3 <= len(m.tris); t += 3 {
		a, b, c := to[m.tris[t]], to[m.tris[t+1]], to[m.tris[t+2]]
		if a == b || b == c || a == c {
			continue
		}
		// One rotation stands for the three of a triangle.
		k := [3]int32{a, b, c}
		switch min(a, b, c) {
		case b:
			k = [3]int32{b, c, a}
		case c:
			k = [3]int32{c, a, b}
		}
		if kept[k] {
			continue
		}
		kept[k] = true
		tris = append(tris, a, b, c)
	}
	used := make([]int32, len(pts)/3)
	for _, v := range tris {
		used[v] = 1
	}
	var out lodMesh
	for i := range used {
		if used[i] != 0 {
			used[i] = int32(len(out.pos)/3) + 1
			out.pos = append(out.pos, pts[3*i:3*i+3]...)
		}
	}
	out.tris = make([]uint32, len(tris))
	for i, v := range tris {
		out.tris[i] = uint32(used[v] - 1)
	}
	return out
}

// segmentGrid is a segment's octree: the grid's origin and the LOD-0 node's
// size (chunk_shape), as the float32 values the manifest holds.
type segmentGrid struct {
	origin, chunk [3]float32
}

// newSegmentGrid puts one LOD-0 node around every LOD's vertices: its low
// corner rounded down to float32, its size rounded up, so every vertex is
// inside. An axis the vertices do not extend along gets the largest size
// of the others (1 when they all have none).
func newSegmentGrid(store string, id int64, lods []lodMesh) (*segmentGrid, error) {
	lo := [3]float64{math.Inf(1), math.Inf(1), math.Inf(1)}
	hi := [3]float64{math.Inf(-1), math.Inf(-1), math.Inf(-1)}
	for z := range lods {
		for i, v := range lods[z].pos {
			if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > math.MaxFloat32/4 {
				return nil, corruptf("store %q: object %d has a vertex coordinate %v, which a mesh cannot place", store, id, v)
			}
			lo[i%3] = min(lo[i%3], v)
			hi[i%3] = max(hi[i%3], v)
		}
	}
	g := &segmentGrid{chunk: [3]float32{1, 1, 1}}
	if lo[0] > hi[0] {
		return g, nil // no vertices
	}
	var ext [3]float64
	for a := range 3 {
		o := float32(lo[a])
		if float64(o) > lo[a] {
			o = math.Nextafter32(o, float32(math.Inf(-1)))
		}
		g.origin[a] = o
		ext[a] = hi[a] - float64(o)
	}
	widest := max(ext[0], ext[1], ext[2])
	if widest == 0 {
		widest = 1
	}
	for a := range 3 {
		e := ext[a]
		if e == 0 {
			e = widest
		}
		c := float32(e)
		for float64(g.origin[a])+float64(c) < hi[a] {
			c = math.Nextafter32(c, float32(math.Inf(1)))
		}
		g.chunk[a] = c
	}
	return g, nil
}

// quantize appends pos's integer positions at LOD z: each coordinate's
// place in the node (2^z LOD-0 nodes a side), rounded to the nearest of
// 2^bits − 1 steps; at LOD > 0 at most the split plane, which every vertex
// is below but for rounding.
func (g *segmentGrid) quantize(dst []uint32, pos []float64, z int) []uint32 {
	steps := float64(uint32(1)<<multilodBits - 1)
	top := steps
	if z > 0 {
		top = float64(uint32(1) << (multilodBits - 1))
	}
	for i, v := range pos {
		a := i % 3
		q := math.Round((v - float64(g.origin[a])) / (float64(g.chunk[a]) * float64(uint64(1)<<z)) * steps)
		dst = append(dst, uint32(min(max(q, 0), top)))
	}
	return dst
}

// appendIndex appends the manifest: the grid, one node per LOD at position
// 0, 0, 0 (each the parent of the one below), and the fragments' sizes.
func (g *segmentGrid) appendIndex(dst []byte, scales []float32, sizes []uint32) []byte {
	le := binary.LittleEndian
	for _, v := range g.chunk {
		dst = le.AppendUint32(dst, math.Float32bits(v))
	}
	for _, v := range g.origin {
		dst = le.AppendUint32(dst, math.Float32bits(v))
	}
	dst = le.AppendUint32(dst, uint32(len(sizes)))
	for _, s := range scales[:len(sizes)] {
		dst = le.AppendUint32(dst, math.Float32bits(s))
	}
	for range 3 * len(sizes) {
		dst = le.AppendUint32(dst, 0) // vertex_offsets
	}
	for range sizes {
		dst = le.AppendUint32(dst, 1) // num_fragments_per_lod
	}
	for _, s := range sizes {
		dst = le.AppendUint32(dst, 0) // x
		dst = le.AppendUint32(dst, 0) // y
		dst = le.AppendUint32(dst, 0) // z
		dst = le.AppendUint32(dst, s)
	}
	return dst
}

// nearestIndex finds the nearest of a fixed set of points: a k-d tree kept
// in one slice (each range's middle element is its node).
type nearestIndex struct {
	pts   []float64 // x, y, z of point i at 3i
	order []int32
}

func newNearestIndex(pts []float64) *nearestIndex {
	t := &nearestIndex{pts: pts, order: make([]int32, len(pts)/3)}
	for i := range t.order {
		t.order[i] = int32(i)
	}
	t.build(0, len(t.order), 0)
	return t
}

func (t *nearestIndex) build(lo, hi, axis int) {
	if hi-lo <= 1 {
		return
	}
	slices.SortFunc(t.order[lo:hi], func(a, b int32) int {
		return cmp.Or(cmp.Compare(t.pts[3*int(a)+axis], t.pts[3*int(b)+axis]), cmp.Compare(a, b))
	})
	mid := (lo + hi) / 2
	t.build(lo, mid, (axis+1)%3)
	t.build(mid+1, hi, (axis+1)%3)
}

// nearest returns the point nearest p (of two as near, the lower index).
func (t *nearestIndex) nearest(p [3]float64) int32 {
	s := nearestSearch{t: t, p: p, best: -1, dist: math.Inf(1)}
	s.visit(0, len(t.order), 0)
	return s.best
}

type nearestSearch struct {
	t    *nearestIndex
	p    [3]float64
	best int32
	dist float64 // squared
}

func (s *nearestSearch) visit(lo, hi, axis int) {
	if lo >= hi {
		return
	}
	mid := (lo + hi) / 2
	i := s.t.order[mid]
	q := s.t.pts[3*int(i) : 3*int(i)+3]
	dx, dy, dz := s.p[0]-q[0], s.p[1]-q[1], s.p[2]-q[2]
	if d := dx*dx + dy*dy + dz*dz; d < s.dist || d == s.dist && i < s.best {
		s.best, s.dist = i, d
	}
	diff := s.p[axis] - q[axis]
	next := (axis + 1) % 3
	if diff <= 0 {
		s.visit(lo, mid, next)
		if diff*diff <= s.dist {
			s.visit(mid+1, hi, next)
		}
	} else {
		s.visit(mid+1, hi, next)
		if diff*diff <= s.dist {
			s.visit(lo, mid, next)
		}
	}
}

// ---- routes ----

func (s *Server) multilodInfo(w http.ResponseWriter, r *http.Request) error {
	start := s.o.Now()
	st, done, err := s.sourceRequest(w, r, "multilod")
	if err != nil || done {
		return err
	}
	levels, err := multilodLevels(st)
	if err != nil {
		return err
	}
	if len(levels) == 0 {
		return notFoundf("store %q has no levels", st.Name())
	}
	body, err := multilodInfoJSON(keyFor(r, st, "seg_props"), st, levels)
	if err != nil {
		return err
	}
	key := "multilod\x00info"
	if chi.URLParam(r, versionParam) != "" {
		key += "\x00versioned"
	}
	return s.send(w, r, st, key, mediaJSON, body, start)
}

// multilodFile answers a segment's manifest (index) or data file,
// building both once per store version through the cache.
func (s *Server) multilodFile(index bool) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		start := s.o.Now()
		st, _, id, done, err := s.objectRequest(w, r, "multilod")
		if err != nil || done {
			return err
		}
		key := fmt.Sprintf("multilod\x00%d", id)
		v, err := s.cached(r.Context(), st, key, func(ctx context.Context) (any, int64, error) {
			levels, err := multilodLevels(st)
			if err != nil {
				return nil, 0, err
			}
			seg, err := buildSegment(ctx, st.Name(), levels, levelScales(levels), id, s.o.MaxAnnotations)
			if err != nil {
				return nil, 0, err
			}
			return seg, int64(len(seg.index)+len(seg.data)) + 128, nil
		})
		if err != nil {
			return err
		}
		seg := v.(*multilodSegment)
		if index {
			return s.send(w, r, st, key+"\x00index", mediaBinary, seg.index, start)
		}
		return s.send(w, r, st, key+"\x00data", mediaBinary, seg.data, start)
	}
}
