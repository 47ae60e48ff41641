package neuroglancer

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"

	"golang.org/x/sync/errgroup"

	"github.com/zvfserve/zvfserve/api/neuroglancer/sharding"
	"github.com/zvfserve/zvfserve/zvf"
)

// annotationInfo is a source's info document (neuroglancer_annotations_v1).
type annotationInfo struct {
	Type           string          `json:"@type"`
	Dimensions     json.RawMessage `json:"dimensions"`
	LowerBound     []float64       `json:"lower_bound"`
	UpperBound     []float64       `json:"upper_bound"`
	AnnotationType string          `json:"annotation_type"`
	Properties     []propSpec      `json:"properties"`
	Relationships  []relationship  `json:"relationships"`
	ByID           keyRef          `json:"by_id"`
	Spatial        []spatialInfo   `json:"spatial"`
	// ZVF says where the annotations come from; Neuroglancer ignores it.
	ZVF sourceNotes `json:"zvfserve"`
}

type keyRef struct {
	Key      string         `json:"key"`
	Sharding *sharding.Spec `json:"sharding,omitempty"`
}

// relationship links each annotation to segment ids: here its ZVF object.
type relationship struct {
	ID  string `json:"id"`
	Key string `json:"key"`
}

// The relationship of a source whose store has objects: every annotation
// names its object (a point: the object whose manifest names its row
// first; none for a row no manifest names), and {key}/{object id} lists
// that object's annotations. Object ids are uint64 segment ids to
// Neuroglancer, which can then link the annotations to a segmentation
// layer of the same objects (the store's skeletons or meshes).
const (
	relationshipID  = "object"
	relationshipKey = "objects"
)

type spatialInfo struct {
	Key       string    `json:"key"`
	GridShape []int64   `json:"grid_shape"`
	ChunkSize []float64 `json:"chunk_size"`
	Limit     int64     `json:"limit"`
	// Sharding is set when the level is served as shard files.
	Sharding *sharding.Spec `json:"sharding,omitempty"`
}

// sourceNotes explain a source: which store and level, how each spatial
// level was chosen, and what became of each attribute.
type sourceNotes struct {
	Store       string       `json:"store"`
	Level       int          `json:"level"`
	Annotations int64        `json:"annotations"`
	Levels      []levelNotes `json:"spatial_levels"`
	Attributes  []note       `json:"attributes"`
	Axes        []string     `json:"axes"`
}

type levelNotes struct {
	Key         string  `json:"key"`
	ZVFLevel    int     `json:"zvf_level"`
	CellChunks  []int64 `json:"cell_chunks"`
	Annotations int64   `json:"annotations"`
	Chosen      string  `json:"chosen"`
}

// infoJSON is the info document of the plan's source; sh, when not nil,
// shards its spatial levels and by_id.
func (p *plan) infoJSON(st *zvf.Store, sh *annotationShards) ([]byte, error) {
	dims, axisNotes := dimensions(st.Info().Axes)
	lo, hi := p.bounds(st.Info().Bounds[1])
	inf := annotationInfo{Type: "neuroglancer_annotations_v1", Dimensions: dimensionsJSON(dims), LowerBound: lo, UpperBound: hi,
		AnnotationType: p.kind.annotationType(), Properties: []propSpec{}, Relationships: []relationship{}, ByID: keyRef{Key: versioned(st, "by_id")},
		ZVF: sourceNotes{Store: p.store, Annotations: p.total, Attributes: append([]note{}, p.notes...), Axes: append([]string{}, axisNotes...)}}
	if p.relate {
		inf.Relationships = append(inf.Relationships, relationship{ID: relationshipID, Key: versioned(st, relationshipKey)})
	}
	for _, pr := range p.props {
		inf.Properties = append(inf.Properties, pr.spec)
	}
	if sh != nil {
		inf.ByID.Sharding = &sh.byID
	}
	for s, l := range p.levels {
		key := versioned(st, fmt.Sprintf("spatial%d", s))
		si := spatialInfo{Key: key, GridShape: l.shape, ChunkSize: l.size, Limit: l.limit}
		if sh != nil {
			si.Sharding = &sh.spatial[s]
		}
		inf.Spatial = append(inf.Spatial, si)
		inf.ZVF.Levels = append(inf.ZVF.Levels, levelNotes{Key: key, ZVFLevel: l.zvf, CellChunks: l.mult, Annotations: l.count, Chosen: l.chosen})
	}
	return json.Marshal(inf)
}

// propBytes is the size of the properties in a record, padded so that the
// record stays a multiple of 4 bytes (its geometry is).
func (p *plan) propBytes() int {
	n := 0
	for _, pr := range p.props {
		n += pr.size
	}
	return (n + 3) &^ 3
}

var zeros [propBudget + 4]byte

// appendProps appends one record's properties: row of the vertex
// attribute columns, the object's attribute row, a line's edge row of
// the link attribute columns, its id (-1: none; the plan has an
// object_id property only when every id fits an int32).
func (p *plan) appendProps(dst []byte, attrs []zvf.Column, row int, oattrs []zvf.Column, edges []zvf.EdgeColumn, edge int, objectID int64) []byte {
	start := len(dst)
	dst = append(dst, zeros[:p.propBytes()]...)
	b := dst[start:]
	for i := range p.props {
		pr := &p.props[i]
		switch pr.from {
		case fromVertex:
			putProp(b, pr, column(attrs, pr.attr), row)
		case fromMean:
			putMean(b, pr, column(attrs, pr.attr))
		case fromObject:
			putProp(b, pr, column(oattrs, pr.attr), 0)
		case fromEdge:
			putEdge(b, pr, edgeColumn(edges, pr.attr), edge)
		case fromObjectID:
			binary.LittleEndian.PutUint32(b, uint32(int32(objectID)))
		}
		b = b[pr.size:]
	}
	return dst
}

// hasObjectID reports whether a property carries the object id.
func (p *plan) hasObjectID() bool {
	for _, pr := range p.props {
		if pr.from == fromObjectID {
			return true
		}
	}
	return false
}

// list is the annotations of one cell being assembled: records back to
// back, where each starts, their ids and their objects (-1: none).
type list struct {
	recs []byte
	offs []int
	ids  []int64
	objs []int64
}

func (l *list) begin(id, object int64) {
	l.offs = append(l.offs, len(l.recs))
	l.ids = append(l.ids, id)
	l.objs = append(l.objs, object)
}

// encode writes the multiple-annotation list: a uint64 count, the records
// and then the ids, both in a random order seeded by the cell, so that
// the prefix Neuroglancer draws of a cell is an unbiased sample and equal
// requests get equal bytes.
func (l *list) encode(seed1, seed2 uint64) []byte {
	n := len(l.ids)
	out := make([]byte, 8, 8+len(l.recs)+8*n)
	binary.LittleEndian.PutUint64(out, uint64(n))
	perm := rand.New(rand.NewPCG(seed1, seed2)).Perm(n)
	for _, i := range perm {
		end := len(l.recs)
		if i+1 < n {
			end = l.offs[i+1]
		}
		out = append(out, l.recs[l.offs[i]:end]...)
	}
	for _, i := range perm {
		out = binary.LittleEndian.AppendUint64(out, uint64(l.ids[i]))
	}
	return out
}

// checkSize refuses a cell larger than one response may be.
func (p *plan) checkSize(s int, key string, cl *cell, limit int64) error {
	if limit <= 0 {
		return nil
	}
	if cl.count > limit {
		return tooLargef("store %q: cell %s of spatial%d holds %d annotations, more than this server's %d per response", p.store, key, s, cl.count, limit)
	}
	if p.kind == kindPolyline {
		var v int64
		for _, i := range cl.objects {
			v += int64(len(p.objects[i].chunks))
		}
		if v > limit {
			return tooLargef("store %q: cell %s of spatial%d holds polylines of %d vertices, more than this server's %d per response", p.store, key, s, v, limit)
		}
	}
	return nil
}

// cellBytes encodes the annotations of cell key of spatial level s.
func (p *plan) cellBytes(ctx context.Context, s int, key string) ([]byte, error) {
	sl := p.levels[s]
	var l list
	if cl := sl.cells[key]; cl != nil {
		var err error
		switch p.kind {
		case kindPoint:
			err = p.pointCell(ctx, s, cl, &l)
		case kindPolyline:
			err = p.polylineCell(ctx, cl, &l)
		case kindLine:
			err = p.lineCell(ctx, s, key, cl, &l)
		}
		if err != nil {
			return nil, err
		}
	}
	h := mix(p.kind.salt() ^ uint64(s))
	for _, c := range []byte(key) {
		h = mix(h ^ uint64(c))
	}
	return l.encode(h, uint64(s)), nil
}

func (p *plan) pointCell(ctx context.Context, s int, cl *cell, l *list) error {
	return gather(ctx, len(cl.chunks), l, func(ctx context.Context, i int, l *list) error {
		return p.pointRows(ctx, int(cl.chunks[i]), false, func(id, _ int64) bool { return p.levelOf(id) == s }, l)
	})
}

// gather fills the lists of n parts (chunks or objects) concurrently, so
// that a cold cell of many chunks reads them at once, and appends them to
// l in order.
func gather(ctx context.Context, n int, l *list, fill func(ctx context.Context, i int, l *list) error) error {
	if n == 1 {
		return fill(ctx, 0, l)
	}
	parts := make([]list, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readConcurrency)
	for i := range parts {
		g.Go(func() error { return fill(gctx, i, &parts[i]) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for i := range parts {
		base := len(l.recs)
		l.recs = append(l.recs, parts[i].recs...)
		for _, off := range parts[i].offs {
			l.offs = append(l.offs, base+off)
		}
		l.ids = append(l.ids, parts[i].ids...)
		l.objs = append(l.objs, parts[i].objs...)
	}
	return nil
}

// pointRows appends the records of chunk c's rows that want accepts, by
// id and object (-1: none; known when owners is set or the records hold
// it, else -1 for every row).
func (p *plan) pointRows(ctx context.Context, c int, owners bool, want func(id, object int64) bool, l *list) error {
	key := p.keys[c]
	t, err := p.level0.Chunk(ctx, key, p.attrs)
	if err != nil {
		return err
	}
	if int64(t.Rows) != p.first[c+1]-p.first[c] {
		return corruptf("store %q level 0 chunk %s: %d rows, %d when the index was built", p.store, key, t.Rows, p.first[c+1]-p.first[c])
	}
	var objects []int64
	if owners || p.hasObjectID() {
		if objects, err = p.level0.ChunkObjects(ctx, key); err != nil {
			return err
		}
	}
	for r := range t.Rows {
		id := p.first[c] + int64(r)
		owner := int64(-1)
		if objects != nil {
			owner = objects[r]
		}
		if !want(id, owner) {
			continue
		}
		l.begin(id, owner)
		l.recs = putFloat32s(l.recs, &t.Vertices, r*p.rank, p.rank)
		l.recs = p.appendProps(l.recs, t.Attributes, r, nil, nil, 0, owner)
	}
	return nil
}

// object reads object i of the plan with the attributes (and a line
// source's link attributes) its properties need, checking it against
// the plan.
func (p *plan) object(ctx context.Context, i int) (*zvf.Object, error) {
	po := &p.objects[i]
	o, err := p.level0.ObjectWith(ctx, po.id, zvf.ObjectQuery{Attributes: p.attrs, LinkAttributes: p.lattrs})
	if err != nil {
		return nil, err
	}
	if o.Count != int64(len(po.chunks)) || p.kind == kindLine && int64(len(o.Edges)/2) != p.edgeFirst[i+1]-p.edgeFirst[i] {
		return nil, corruptf("store %q level 0: object %d changed since the index was built", p.store, po.id)
	}
	return o, nil
}

func (p *plan) polylineCell(ctx context.Context, cl *cell, l *list) error {
	return gather(ctx, len(cl.objects), l, func(ctx context.Context, i int, l *list) error {
		return p.polylineRecord(ctx, int(cl.objects[i]), l)
	})
}

func (p *plan) polylineRecord(ctx context.Context, i int, l *list) error {
	o, err := p.object(ctx, i)
	if err != nil {
		return err
	}
	l.begin(o.ID, o.ID)
	l.recs = binary.LittleEndian.AppendUint32(l.recs, uint32(o.Count))
	l.recs = putFloat32s(l.recs, &o.Vertices, 0, int(o.Count)*p.rank)
	l.recs = p.appendProps(l.recs, o.Attributes, 0, o.ObjectAttributes, nil, 0, o.ID)
	return nil
}

func (p *plan) lineCell(ctx context.Context, s int, key string, cl *cell, l *list) error {
	sl := p.levels[s]
	return gather(ctx, len(cl.objects), l, func(ctx context.Context, i int, l *list) error {
		po := &p.objects[cl.objects[i]]
		base := p.edgeFirst[cl.objects[i]]
		return p.lineRecords(ctx, int(cl.objects[i]), func(id int64, a, b int64) bool {
			return p.levelOf(id) == s && (sl.ofKey[po.chunks[a]] == key || sl.ofKey[po.chunks[b]] == key || p.crossesCell(sl, po, id-base, key))
		}, l)
	})
}

// lineRecords appends the records of object i's edges that want accepts.
func (p *plan) lineRecords(ctx context.Context, i int, want func(id, a, b int64) bool, l *list) error {
	o, err := p.object(ctx, i)
	if err != nil {
		return err
	}
	base := p.edgeFirst[i]
	for e := range int64(len(o.Edges) / 2) {
		a, b := o.Edges[2*e], o.Edges[2*e+1]
		if !want(base+e, a, b) {
			continue
		}
		l.begin(base+e, o.ID)
		l.recs = putFloat32s(l.recs, &o.Vertices, int(a)*p.rank, p.rank)
		l.recs = putFloat32s(l.recs, &o.Vertices, int(b)*p.rank, p.rank)
		l.recs = p.appendProps(l.recs, o.Attributes, int(a), nil, o.EdgeAttributes, int(e), o.ID)
	}
	return nil
}

// byID encodes annotation id alone: its record, then its relationship's
// segment list (its object, or none for a point no manifest names).
func (p *plan) byID(ctx context.Context, id int64) ([]byte, error) {
	var l list
	missing := p.noID(id)
	if !p.hasID(id) {
		return nil, missing
	}
	switch p.kind {
	case kindPoint:
		c := sort.Search(len(p.keys), func(c int) bool { return p.first[c+1] > id })
		if err := p.pointRows(ctx, c, p.relate, func(x, _ int64) bool { return x == id }, &l); err != nil {
			return nil, err
		}
	case kindPolyline:
		i, _ := p.objectNamed(id)
		if err := p.polylineRecord(ctx, i, &l); err != nil {
			return nil, err
		}
	case kindLine:
		i := sort.Search(len(p.objects), func(i int) bool { return p.edgeFirst[i+1] > id })
		if err := p.lineRecords(ctx, i, func(x, _, _ int64) bool { return x == id }, &l); err != nil {
			return nil, err
		}
	}
	if len(l.ids) != 1 {
		return nil, missing
	}
	return p.byIDRecord(&l, 0), nil
}

// hasID reports whether the source has annotation id, from the plan
// alone: points and lines are numbered from 0 below the count, a
// polyline has its object's id.
func (p *plan) hasID(id int64) bool {
	if p.kind == kindPolyline {
		_, ok := p.objectNamed(id)
		return ok
	}
	return id >= 0 && id < p.total
}

// noID is the 404 of an annotation id the source does not have.
func (p *plan) noID(id int64) error {
	return notFoundf("store %q has no %s annotation %d", p.store, p.kind.annotationType(), id)
}

// byIDRecord is annotation i of l as by_id holds it: its record, then its
// relationship's segment list (its object, or none for a point no
// manifest names). The unsharded and sharded by_id share it.
func (p *plan) byIDRecord(l *list, i int) []byte {
	end := len(l.recs)
	if i+1 < len(l.offs) {
		end = l.offs[i+1]
	}
	out := make([]byte, 0, end-l.offs[i]+12)
	out = append(out, l.recs[l.offs[i]:end]...)
	if p.relate {
		if obj := l.objs[i]; obj == -1 && p.kind == kindPoint {
			out = binary.LittleEndian.AppendUint32(out, 0)
		} else {
			out = binary.LittleEndian.AppendUint32(out, 1)
			out = binary.LittleEndian.AppendUint64(out, uint64(obj))
		}
	}
	return out
}

// checkObjectSize refuses object id of a polyline or line source when
// the plan says it has more vertices (a polyline) or edges (a line
// source's object) than limit (0: none): known without reading it, so
// its 413 comes before preconditions (RFC 9110 13.2.1), as a cell's
// does. A point source's object is counted only from its chunks
// (objectBytes), and a missing object passes (its 404 comes later).
func (p *plan) checkObjectSize(id, limit int64) error {
	if limit <= 0 || p.kind == kindPoint {
		return nil
	}
	i, ok := p.objectNamed(id)
	if !ok {
		return nil
	}
	n, what := int64(len(p.objects[i].chunks)), "vertices"
	if p.kind == kindLine {
		n, what = p.edgeFirst[i+1]-p.edgeFirst[i], "edges"
	}
	if n > limit {
		return tooLargef("store %q: object %d has %d %s, more than this server's %d per response", p.store, id, n, what, limit)
	}
	return nil
}

// objectBytes encodes the annotations related to object id, all of them
// whatever their spatial level, as a multiple-annotation list: a point
// source's rows the object owns, a polyline source's polyline, a line
// source's edges. An object the store lacks is not found; one without
// annotations is an empty list. limit bounds the annotations (0: none).
func (p *plan) objectBytes(ctx context.Context, id int64, limit int64) ([]byte, error) {
	m, err := p.level0.Manifest(ctx, id)
	if err != nil {
		return nil, err
	}
	tooMany := func(n int64, what string) error {
		return tooLargef("store %q: object %d has %d %s, more than this server's %d per response", p.store, id, n, what, limit)
	}
	var l list
	switch p.kind {
	case kindPoint:
		var rows int64
		var chunks []int32
		for _, b := range m.Blocks {
			c, ok := p.ordinal[b.Chunk.String()]
			if !ok {
				return nil, corruptf("store %q level 0: object %d names chunk %s, which does not exist", p.store, id, b.Chunk)
			}
			chunks = append(chunks, c)
			for _, f := range b.Fragments {
				rows += f.Count
			}
		}
		if limit > 0 && rows > limit {
			return nil, tooMany(rows, "vertices")
		}
		slices.Sort(chunks)
		chunks = slices.Compact(chunks)
		err = gather(ctx, len(chunks), &l, func(ctx context.Context, i int, l *list) error {
			return p.pointRows(ctx, int(chunks[i]), true, func(_, owner int64) bool { return owner == id }, l)
		})
	case kindPolyline:
		if i, ok := p.objectNamed(id); ok {
			if n := int64(len(p.objects[i].chunks)); limit > 0 && n > limit {
				return nil, tooMany(n, "vertices")
			}
			err = p.polylineRecord(ctx, i, &l)
		}
	case kindLine:
		if i, ok := p.objectNamed(id); ok {
			if n := p.edgeFirst[i+1] - p.edgeFirst[i]; limit > 0 && n > limit {
				return nil, tooMany(n, "edges")
			}
			err = p.lineRecords(ctx, i, func(_, _, _ int64) bool { return true }, &l)
		}
	}
	if err != nil {
		return nil, err
	}
	return l.encode(mix(p.kind.salt()^uint64(id)), uint64(id)), nil
}
