package api

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/zvfserve/zvfserve/zvf"
)

// GeoArrow (docs/arrow.md): f=geoarrow on the bbox and object routes, an
// Arrow IPC stream with one row per object: a geometry column of a
// GeoArrow extension type with interleaved float64 coordinates
// (FixedSizeList<double>[dims], the spec's "xy"/"xyz"), object_id beside
// it, then the level's object attributes by name.
//
//   - points: geoarrow.multipoint per object, its rows in answer order; a
//     level without objects has a row per vertex, geoarrow.point, with the
//     vertex attributes asked for;
//   - streamlines: geoarrow.multilinestring per object on the bbox route,
//     a linestring per run of consecutive edges (a line that leaves the box
//     and comes back is two), geoarrow.linestring on the object route (the
//     object's vertices in manifest order);
//   - skeletons and graphs: geoarrow.multilinestring whose linestrings are
//     the object's edges, two points each;
//   - in every multilinestring, a vertex of the object that none of its
//     edges in the answer touches is a linestring of one point.
//
// An edge belongs to the object of its first vertex. Rows come in the
// order the answer first meets their object; a row without an object
// (object id −1 in the other formats) has a null object_id.
//
// Rows of one object come from many chunks, so the encoder holds the
// answer until its end: at most the answer's limit of vertices (limit=,
// at most --max-vertices), as float64 coordinates, object ids and edges,
// then writes objects in record batches of about geoBatchCoords
// coordinates.
// A box of points pages like the other formats (an object cut by a page
// is a row in each page); a box of lines is one answer, and one with more
// vertices than the limit is a 413, since a page's edges reach rows of
// the pages before it.

type geoarrowCodec struct{}

func (geoarrowCodec) format() string      { return "geoarrow" }
func (geoarrowCodec) contentType() string { return arrowMediaType }
func (geoarrowCodec) compressible() bool  { return true }
func (geoarrowCodec) newEncoder() encoder { return &geoarrowEncoder{} }

// pageRows: the answer's limit bounds what GeoArrow holds, as for the
// file formats (a page of lines could not be cut shorter: it is refused
// past the limit); the encoder counts it in the answer's memory.
func (geoarrowCodec) pageRows(*payloadMeta) int64 { return 0 }

// GeoArrow extension names.
const (
	geoPoint           = "geoarrow.point"
	geoMultiPoint      = "geoarrow.multipoint"
	geoLineString      = "geoarrow.linestring"
	geoMultiLineString = "geoarrow.multilinestring"
)

// geoMeta is what the GeoArrow encoder needs of the request.
type geoMeta struct {
	geom     string // the store's geometry (point_cloud, streamline, graph, …)
	objectID int64  // the object route's object, or −1
	// pageable: the answer may be a page (points); otherwise an answer
	// with more rows than maxRows is refused.
	pageable bool
	maxRows  int64
	// batchCoords bounds a record batch's coordinates (geoBatchCoords).
	batchCoords int32
	// objectAttrs are the level's object attributes; attrsOf reads one
	// object's.
	objectAttrs []zvf.AttrInfo
	attrsOf     func(id int64) ([]zvf.Column, error)
}

// geoKind is the GeoArrow type a geometry's answer gets; "" when GeoArrow
// cannot hold it.
func geoKind(geom string, objects, objectRoute bool) string {
	switch geom {
	case "point_cloud":
		if objects {
			return geoMultiPoint
		}
		return geoPoint
	case "streamline", "polyline", "line":
		if objectRoute {
			return geoLineString
		}
		return geoMultiLineString
	case "graph", "skeleton":
		return geoMultiLineString
	}
	return ""
}

type geoarrowEncoder struct {
	w      *bufio.Writer
	mem    *answerMem
	m      *payloadMeta
	g      *geoMeta
	kind   string
	rows   int
	coords []float64
	ids    []int64
	attrs  []zvf.Column // per-vertex points only: the rows' attributes
}

func (e *geoarrowEncoder) begin(w *bufio.Writer, m *payloadMeta, mem *answerMem) error {
	if m.Arrow == nil || m.Arrow.geo == nil {
		return fmt.Errorf("geoarrow answer without its setup")
	}
	e.w, e.m, e.g, e.mem = w, m, m.Arrow.geo, mem
	e.kind = geoKind(e.g.geom, m.ObjectIDs || e.g.objectID >= 0, e.g.objectID >= 0)
	if e.kind == "" || m.Dims < 2 || m.Dims > 3 {
		return notAcceptable(fmt.Sprintf("f=geoarrow holds points and lines of 2 or 3 dimensions, not %d-dimensional %s", m.Dims, e.g.geom))
	}
	return nil
}

func (e *geoarrowEncoder) batch(b *zvf.Batch) error {
	if int64(e.rows)+int64(b.Rows) > e.g.maxRows {
		return fmt.Errorf("answer has more than its %d rows", e.g.maxRows)
	}
	var err error
	if e.coords, err = appendFloat64s(e.coords, &b.Vertices, b.Rows*e.m.Dims); err != nil {
		return err
	}
	if e.m.ObjectIDs {
		if len(b.ObjectIDs) != b.Rows {
			return fmt.Errorf("batch of %d rows has %d object ids", b.Rows, len(b.ObjectIDs))
		}
		e.ids = append(e.ids, b.ObjectIDs...)
	}
	if e.kind == geoPoint {
		if e.attrs == nil {
			e.attrs = make([]zvf.Column, len(b.Attributes))
			for k := range b.Attributes {
				e.attrs[k] = b.Attributes[k]
				e.attrs[k].Data = nil
			}
		}
		if len(b.Attributes) != len(e.attrs) {
			return fmt.Errorf("batch has %d attribute columns, the answer %d", len(b.Attributes), len(e.attrs))
		}
		for k := range b.Attributes {
			e.attrs[k].Data = append(e.attrs[k].Data, b.Attributes[k].Data...)
		}
	}
	e.rows += b.Rows
	e.account(0)
	return nil
}

// account counts what the encoder holds in the answer's memory: the
// rows it keeps, and extra bytes of the geometry being built.
func (e *geoarrowEncoder) account(extra int64) {
	n := int64(8*cap(e.coords)+8*cap(e.ids)) + extra
	for k := range e.attrs {
		n += int64(cap(e.attrs[k].Data))
	}
	e.mem.hold(n)
}

// appendFloat64s appends the first n elements of c as float64.
func appendFloat64s(dst []float64, c *zvf.Column, n int) ([]float64, error) {
	if len(c.Data) < n*dtypeSize(c.DType) {
		return dst, fmt.Errorf("vertices: %d bytes for %d %s values", len(c.Data), n, c.DType)
	}
	switch c.DType {
	case "float32":
		for i := range n {
			dst = append(dst, float64(math.Float32frombits(binary.LittleEndian.Uint32(c.Data[4*i:]))))
		}
	case "float64":
		for i := range n {
			dst = append(dst, math.Float64frombits(binary.LittleEndian.Uint64(c.Data[8*i:])))
		}
	default:
		for i := range n {
			switch v := c.At(i); v.Kind {
			case zvf.KindInt:
				dst = append(dst, float64(v.I))
			case zvf.KindUint:
				dst = append(dst, float64(v.U))
			default:
				dst = append(dst, v.F)
			}
		}
	}
	return dst, nil
}

func (e *geoarrowEncoder) end(t *trailer) error {
	defer func() {
		// Written (or failed): nothing is held any more.
		e.coords, e.ids, e.attrs = nil, nil, nil
		e.mem.hold(0)
	}()
	if t.Next != "" && !e.g.pageable {
		return tooLarge(fmt.Sprintf("the box holds more than %d vertices, more than one f=geoarrow answer of lines may (a page's edges reach rows of the pages before it); ask for a smaller box or a coarser level, or page f=arrow", e.g.maxRows))
	}
	if len(t.Edges)%2 != 0 {
		return fmt.Errorf("%d edge indices", len(t.Edges))
	}
	for _, x := range t.Edges {
		if x < 0 || x >= int64(e.rows) {
			return fmt.Errorf("edge index %d outside the answer's %d rows", x, e.rows)
		}
	}
	md, err := closingMetadata(t)
	if err != nil {
		return err
	}
	if e.kind == geoPoint {
		return e.writePoints(md)
	}
	// Objects in the order the answer meets them.
	objOf := make([]int32, e.rows)
	var objects []int64
	if e.g.objectID >= 0 {
		objects = []int64{e.g.objectID}
	} else {
		seen := map[int64]int32{}
		for r := range e.rows {
			id := int64(-1)
			if e.ids != nil {
				id = e.ids[r]
			}
			o, ok := seen[id]
			if !ok {
				o = int32(len(objects))
				seen[id] = o
				objects = append(objects, id)
			}
			objOf[r] = o
		}
	}
	var g geomParts
	switch e.kind {
	case geoMultiPoint:
		g = groupPoints(objOf, len(objects))
	case geoLineString:
		g = oneLine(e.rows)
	default:
		g = lineParts(objOf, len(objects), t.Edges, e.g.geom == "graph" || e.g.geom == "skeleton")
	}
	// Beside the rows: each row's object, the listed rows and their
	// offsets, a batch's gathered coordinates.
	e.account(int64(4*len(objOf) + 4*(len(g.rows)+len(g.parts)+len(g.objects)) + 8*e.m.Dims*int(min(e.g.batchCoords, int32(len(g.rows))))))
	if len(g.rows) > math.MaxInt32 {
		return tooLarge(fmt.Sprintf("%d coordinates: more than one GeoArrow answer can index", len(g.rows)))
	}
	return e.writeObjects(objects, &g, md)
}

// writePoints writes a row per vertex: geoarrow.point and the vertex
// attributes.
func (e *geoarrowEncoder) writePoints(md map[string]string) error {
	coord := coordType(e.m.Dims)
	fields := []arrow.Field{geometryField(coord, geoPoint)}
	data := []*array.Data{coordData(coord, e.coords, e.rows)}
	var cols []*arrowColumn
	defer func() {
		for _, c := range cols {
			c.release()
		}
	}()
	for k, a := range e.m.Attributes {
		c, err := newArrowColumn(a)
		if err != nil {
			releaseAll(data)
			return err
		}
		cols = append(cols, c)
		fields = append(fields, arrow.Field{Name: a.Name, Type: c.typ, Nullable: c.elem.ID() == arrow.DICTIONARY})
		col := zvf.Column{}
		if k < len(e.attrs) {
			col = e.attrs[k]
		} else if e.rows > 0 {
			releaseAll(data)
			return fmt.Errorf("attribute %q missing from the answer", a.Name)
		}
		d, err := c.data(&col, e.rows, nil, 0)
		if err != nil {
			releaseAll(data)
			return err
		}
		data = append(data, d)
	}
	return e.write(fields, data, e.rows, md)
}

// geoBatchCoords bounds the coordinates of one GeoArrow record batch
// (an object with more is a batch of its own): the batch's coordinates
// are gathered into a buffer reused from batch to batch.
const geoBatchCoords = 1 << 16

// writeObjects writes a row per object: its geometry, object_id and the
// object attributes, objects in record batches of about batchCoords
// coordinates; the last carries the closing metadata.
func (e *geoarrowEncoder) writeObjects(objects []int64, g *geomParts, md map[string]string) error {
	dims := e.m.Dims
	coord := coordType(dims)
	line := arrow.ListOfField(arrow.Field{Name: "vertices", Type: coord})
	multi := e.kind == geoMultiLineString
	var gtype arrow.DataType
	switch e.kind {
	case geoMultiPoint:
		gtype = arrow.ListOfField(arrow.Field{Name: "points", Type: coord})
	case geoLineString:
		gtype = line
	default:
		gtype = arrow.ListOfField(arrow.Field{Name: "linestrings", Type: line})
	}
	fields := []arrow.Field{geometryField(gtype, e.kind), {Name: "object_id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}
	var cols []*arrowColumn
	defer func() {
		for _, c := range cols {
			c.release()
		}
	}()
	for _, a := range e.g.objectAttrs {
		c, err := newArrowColumn(zvf.AttrInfo{Name: a.Name, DType: a.DType, Channels: a.Channels})
		if err != nil {
			return err
		}
		cols = append(cols, c)
		fields = append(fields, arrow.Field{Name: a.Name, Type: c.typ, Nullable: true})
	}
	aw, err := newArrowWriter(e.w, fields, e.m)
	if err != nil {
		return err
	}
	// span is where object o's coordinates lie in g.rows.
	span := func(o int) (int32, int32) {
		if multi {
			return g.parts[g.objects[o]], g.parts[g.objects[o+1]]
		}
		return g.objects[o], g.objects[o+1]
	}
	var coords []float64
	var objOffs, partOffs []int32
	for o0 := 0; ; {
		o1 := o0
		var lo int32
		if o0 < len(objects) {
			lo, _ = span(o0)
		}
		for o1 < len(objects) {
			_, hi := span(o1)
			if o1 > o0 && hi-lo > e.g.batchCoords {
				break
			}
			o1++
		}
		hi := lo
		if o1 > o0 {
			_, hi = span(o1 - 1)
		}
		coords = coords[:0]
		for _, r := range g.rows[lo:hi] {
			coords = append(coords, e.coords[int(r)*dims:int(r+1)*dims]...)
		}
		geom := coordData(coord, coords, int(hi-lo))
		if multi {
			p0, p1 := g.objects[o0], g.objects[o1]
			partOffs = rebased(partOffs, g.parts[p0:p1+1])
			geom = listData(line, int(p1-p0), partOffs, geom)
		}
		objOffs = rebased(objOffs, g.objects[o0:o1+1])
		geom = listData(gtype, o1-o0, objOffs, geom)
		data := []*array.Data{geom, idData(objects[o0:o1])}
		for _, c := range cols {
			d, err := e.objectColumn(c, objects[o0:o1])
			if err != nil {
				releaseAll(data)
				return err
			}
			data = append(data, d)
		}
		var closing map[string]string
		if o1 == len(objects) {
			closing = md
		}
		if err := aw.write(data, o1-o0, closing); err != nil {
			return err
		}
		if o0 = o1; o0 == len(objects) {
			return aw.w.Close()
		}
	}
}

// rebased is offs less its first, into dst (an Arrow batch's offsets
// start at 0).
func rebased(dst, offs []int32) []int32 {
	dst = dst[:0]
	for _, o := range offs {
		dst = append(dst, o-offs[0])
	}
	return dst
}

// objectColumn gathers one object attribute over the rows' objects; an
// object without a value (absent, or no object) is null.
func (e *geoarrowEncoder) objectColumn(c *arrowColumn, objects []int64) (*array.Data, error) {
	w := c.channels * c.size
	buf := make([]byte, len(objects)*w)
	valid := make([]byte, bitmapBytes(len(objects)))
	nulls := 0
	for i, id := range objects {
		found := false
		if id >= 0 && e.g.attrsOf != nil {
			cols, err := e.g.attrsOf(id)
			if err != nil {
				return nil, err
			}
			for _, col := range cols {
				if col.Name == c.name && len(col.Data) == w {
					copy(buf[i*w:], col.Data)
					found = true
				}
			}
		}
		if found {
			valid[i>>3] |= 1 << (i & 7)
		} else {
			nulls++
		}
	}
	return c.data(&zvf.Column{Name: c.name, Data: buf}, len(objects), valid, nulls)
}

func (e *geoarrowEncoder) write(fields []arrow.Field, data []*array.Data, rows int, md map[string]string) error {
	aw, err := newArrowWriter(e.w, fields, e.m)
	if err != nil {
		releaseAll(data)
		return err
	}
	if err := aw.write(data, rows, md); err != nil {
		return err
	}
	return aw.w.Close()
}

func releaseAll(data []*array.Data) {
	for _, d := range data {
		d.Release()
	}
}

// coordType is GeoArrow's interleaved coordinate: FixedSizeList<double>
// named for its dimensions.
func coordType(dims int) arrow.DataType {
	name := "xy"
	if dims == 3 {
		name = "xyz"
	}
	return arrow.FixedSizeListOfField(int32(dims), arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Float64})
}

func geometryField(t arrow.DataType, ext string) arrow.Field {
	md := arrow.NewMetadata([]string{"ARROW:extension:name", "ARROW:extension:metadata"}, []string{ext, "{}"})
	return arrow.Field{Name: "geometry", Type: t, Metadata: md}
}

func coordData(t arrow.DataType, coords []float64, n int) *array.Data {
	vals := array.NewData(arrow.PrimitiveTypes.Float64, len(coords), []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Float64Traits.CastToBytes(coords))}, nil, 0, 0)
	out := array.NewData(t, n, []*memory.Buffer{nil}, []arrow.ArrayData{vals}, 0, 0)
	vals.Release()
	return out
}

// listData wraps child (consumed) as a list of n elements with offsets.
func listData(t arrow.DataType, n int, offsets []int32, child *array.Data) *array.Data {
	out := array.NewData(t, n, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offsets))}, []arrow.ArrayData{child}, 0, 0)
	child.Release()
	return out
}

// idData is the object_id column: −1 (no object) is null.
func idData(ids []int64) *array.Data {
	valid := make([]byte, bitmapBytes(len(ids)))
	vals := make([]int64, len(ids))
	nulls := 0
	for i, id := range ids {
		if id < 0 {
			nulls++
			continue
		}
		vals[i] = id
		valid[i>>3] |= 1 << (i & 7)
	}
	var vb *memory.Buffer
	if nulls > 0 {
		vb = memory.NewBufferBytes(valid)
	}
	return array.NewData(arrow.PrimitiveTypes.Int64, len(ids), []*memory.Buffer{vb, memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(vals))}, nil, nulls, 0)
}

// geomParts is the geometry of an answer's objects: the rows whose
// coordinates it lists in order, cut into parts (parts[p]:parts[p+1] of
// rows) and the parts into objects (objects[o]:objects[o+1] of parts, or
// of rows when there are no parts: multipoints, linestrings).
type geomParts struct {
	rows    []int32
	parts   []int32
	objects []int32
}

// groupPoints lists each object's rows in answer order.
func groupPoints(objOf []int32, nobj int) geomParts {
	g := geomParts{rows: make([]int32, len(objOf)), objects: make([]int32, nobj+1)}
	for _, o := range objOf {
		g.objects[o+1]++
	}
	for o := range nobj {
		g.objects[o+1] += g.objects[o]
	}
	next := slices.Clone(g.objects[:nobj])
	for r, o := range objOf {
		g.rows[next[o]] = int32(r)
		next[o]++
	}
	return g
}

// oneLine is one linestring of all n rows in order.
func oneLine(n int) geomParts {
	g := geomParts{rows: make([]int32, n), objects: []int32{0, int32(n)}}
	for r := range g.rows {
		g.rows[r] = int32(r)
	}
	return g
}

// lineParts cuts each object's edges into linestrings: each edge a
// linestring of two points (segments), or runs of consecutive edges
// (streamlines); a row of the object no edge of it touches is a
// linestring of one point. Segments come in answer order, then the lone
// rows; runs and lone rows by their first row.
func lineParts(objOf []int32, nobj int, edges []int64, segments bool) geomParts {
	n, ne := len(objOf), len(edges)/2
	// The edges of each object, in answer order.
	eoff := make([]int32, nobj+1)
	for e := range ne {
		eoff[objOf[edges[2*e]]+1]++
	}
	for o := range nobj {
		eoff[o+1] += eoff[o]
	}
	byObj := make([]int32, ne)
	next := slices.Clone(eoff[:nobj])
	for e := range ne {
		o := objOf[edges[2*e]]
		byObj[next[o]] = int32(e)
		next[o]++
	}
	rowsOf := groupPoints(objOf, nobj)
	g := geomParts{parts: []int32{0}, objects: make([]int32, 1, nobj+1)}
	touched := make([]bool, n)
	t := newTrails(n)
	for o := range nobj {
		es := byObj[eoff[o]:eoff[o+1]]
		for _, e := range es {
			for _, v := range edges[2*e : 2*e+2] {
				if objOf[v] == int32(o) {
					touched[v] = true
				}
			}
		}
		var lone []int32
		for _, r := range rowsOf.rows[rowsOf.objects[o]:rowsOf.objects[o+1]] {
			if !touched[r] {
				lone = append(lone, r)
			}
		}
		if segments {
			for _, e := range es {
				g.rows = append(g.rows, int32(edges[2*e]), int32(edges[2*e+1]))
				g.parts = append(g.parts, int32(len(g.rows)))
			}
			for _, r := range lone {
				g.rows = append(g.rows, r)
				g.parts = append(g.parts, int32(len(g.rows)))
			}
		} else {
			g.rows, g.parts = t.runs(g.rows, g.parts, edges, es, lone)
		}
		g.objects = append(g.objects, int32(len(g.parts)-1))
	}
	return g
}

// trails finds the runs of consecutive edges of one object at a time,
// over arrays indexed by row that it resets after each object.
type trails struct {
	lo, hi, next, indeg []int32
}

func newTrails(n int) *trails {
	return &trails{lo: make([]int32, n), hi: make([]int32, n), next: make([]int32, n), indeg: make([]int32, n)}
}

// runs appends the streamlines of edges es (with the lone rows, a run of
// one point each) to rows and parts. An edge (a, b) says b follows a:
// runs start, in row order, at the rows more of the edges leave than
// reach (one run per extra edge), then at the first row of each closed
// run; each follows the first unused edge, in answer order. A row shared
// by lines (a coarse level's metavertex) is in every run through it.
// Runs are ordered by their first row.
func (t *trails) runs(rows, parts []int32, edges []int64, es []int32, lone []int32) ([]int32, []int32) {
	sorted := slices.Clone(es)
	slices.SortStableFunc(sorted, func(x, y int32) int { return cmp.Compare(edges[2*x], edges[2*y]) })
	var verts []int32
	for i, e := range sorted {
		a, b := int32(edges[2*e]), int32(edges[2*e+1])
		if i == 0 || int32(edges[2*sorted[i-1]]) != a {
			t.lo[a], t.next[a] = int32(i), int32(i)
		}
		t.hi[a] = int32(i + 1)
		t.indeg[b]++
		verts = append(verts, a, b)
	}
	slices.Sort(verts)
	verts = slices.Compact(verts)
	type run struct{ lo, hi int }
	var found []run
	var order []int32
	follow := func(v int32) {
		lo := len(order)
		order = append(order, v)
		for t.next[v] < t.hi[v] {
			w := int32(edges[2*sorted[t.next[v]]+1])
			t.next[v]++
			order = append(order, w)
			v = w
		}
		found = append(found, run{lo, len(order)})
	}
	for _, v := range verts {
		for k := t.indeg[v]; k < t.hi[v]-t.lo[v]; k++ {
			follow(v)
		}
	}
	for _, v := range verts {
		for t.next[v] < t.hi[v] {
			follow(v) // closed runs: what is left is balanced
		}
	}
	for _, r := range lone {
		found = append(found, run{len(order), len(order) + 1})
		order = append(order, r)
	}
	slices.SortStableFunc(found, func(x, y run) int { return cmp.Compare(order[x.lo], order[y.lo]) })
	for _, r := range found {
		rows = append(rows, order[r.lo:r.hi]...)
		parts = append(parts, int32(len(rows)))
	}
	for _, v := range verts {
		t.lo[v], t.hi[v], t.next[v], t.indeg[v] = 0, 0, 0, 0
	}
	return rows, parts
}
