package api

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/zvfserve/zvfserve/api/jsonnum"
	"github.com/zvfserve/zvfserve/api/problem"
	"github.com/zvfserve/zvfserve/zvf"
)

// Domain file formats (docs/exports.md): SWC, TRK, TCK, PLY, OBJ, STL,
// GLB and CSV, on the bbox and object routes. Each is a codec like JSON or
// the binary layout, plus what a file format needs beyond a payload: the
// geometries it can hold (any other is a 406 before any work), a download
// name, whether a page of it is a file of its own, and for some the
// attributes it must read whatever attributes= says (SWC's radius).

// shape is what an answer is, as far as a file format cares.
type shape struct {
	kind string // "bbox" or "object"
	geom string // the store's geometry: point_cloud, streamline, graph, skeleton, mesh, …
	dims int
}

// fileCodec is a codec that writes a domain file format.
type fileCodec interface {
	codec
	// holds is nil when the format can hold an answer of this shape, else
	// a 406 problem saying why.
	holds(sh shape) error
	extension() string
	// pages reports whether a page of such an answer is a whole file of
	// its own: no connection of the format can reach another page.
	pages(sh shape) bool
}

// exportCodec is a domain file format described by its values: the
// formats differ in these, not in how a codec uses them.
type exportCodec struct {
	name, mime string // f= name (and file extension), media type
	compress   bool
	geoms      []string // the store geometries it holds
	only3D     bool     // it holds x, y, z vertices only
	// pageGeoms are the geometries whose page is a whole file of its own:
	// no connection of the format reaches another page.
	pageGeoms []string
	encoder   func() encoder
}

func (c exportCodec) format() string      { return c.name }
func (c exportCodec) contentType() string { return c.mime }
func (c exportCodec) compressible() bool  { return c.compress }
func (c exportCodec) newEncoder() encoder { return c.encoder() }
func (c exportCodec) extension() string   { return c.name }
func (c exportCodec) pages(sh shape) bool { return slices.Contains(c.pageGeoms, sh.geom) }

// pageRows: a page of a file is bounded by its row limit alone; the
// formats that hold the answer count what they keep against the answers'
// budget as it grows (holder).
func (exportCodec) pageRows(*payloadMeta) int64 { return 0 }

func (c exportCodec) holds(sh shape) error {
	if err := geometryIn(c.name, sh, c.geoms...); err != nil || !c.only3D {
		return err
	}
	return only3D(c.name, sh)
}

// holding is the encoder of a format that holds the answer until its end
// and then writes it whole.
func holding(write func(*bufio.Writer, *held) error) func() encoder {
	return func() encoder { return &holder{write: write} }
}

// attrPicker is a fileCodec that chooses the attribute columns it reads
// (asked: what attributes= names).
type attrPicker interface {
	pickAttributes(l *zvf.Level, asked []string) []string
}

// exportMeta is what a file format's encoder needs beyond payloadMeta.
type exportMeta struct {
	format string // its f= name
	geom   string
	axes   []zvf.Axis
	// pageable: this answer may be a page (the format allows it and the
	// client paged explicitly, with limit= or cursor=); otherwise an
	// answer with more rows is refused, never cut short.
	pageable bool
	// maxRows is the most rows the answer may hold (its limit): what an
	// encoder that holds the answer can be sent.
	maxRows int64
	// source says where the answer comes from, for a file's comments.
	source string
	// trk is the voxel space of a TRK file (identity when the store
	// has no transform); set for f=trk only.
	trk *trkSpace
}

// geometryOf is the store's primary geometry, as zvf reads it.
func geometryOf(st *zvf.Store) string {
	if g := st.Info().GeometryTypes; len(g) > 0 && g[0] != "" {
		return g[0]
	}
	return "point_cloud"
}

// answerCodecs are the formats of the bbox and object routes: the vertex
// payloads, then the domain file formats (which never win an Accept of
// */*: the payloads come first).
func answerCodecs(text *batchers) []codec {
	return append(payloadCodecs(text), geoarrowCodec{}, csvCodec, plyCodec, swcCodec{swcFormat}, trkCodec, tckCodec, objCodec, stlCodec, glbCodec)
}

// formatNames lists codecs' f= names.
func formatNames(cs []codec) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.format()
	}
	return out
}

// negotiateAnswer picks the representation of a bbox or object answer:
// among the formats that can hold this store's answers (f= naming one that
// cannot is a 406 saying why; Accept only considers those that can).
func (s *Server) negotiateAnswer(r *http.Request, st *zvf.Store, kind string) (representation, error) {
	sh := shape{kind: kind, geom: geometryOf(st), dims: st.Info().Dims}
	fits := s.answerFits(sh)
	if f := query(r).Get("f"); f != "" && !slices.ContainsFunc(fits, func(c codec) bool { return c.format() == f }) {
		for _, c := range answerCodecs(&s.text) {
			if fc, ok := c.(fileCodec); ok && c.format() == f {
				if err := fc.holds(sh); err != nil {
					return representation{}, err
				}
			}
		}
	}
	return negotiate(r, fits)
}

// answerFits are the answer formats that can hold answers of shape sh,
// worked out once per shape: a request only needs the reason a format
// cannot when its f= names one. The map is replaced, never changed (a
// server sees a handful of shapes), so a lookup takes no lock.
func (s *Server) answerFits(sh shape) []codec {
	for {
		old := s.fits.Load()
		if old != nil {
			if fits, ok := (*old)[sh]; ok {
				return fits
			}
		}
		all := answerCodecs(&s.text)
		fits := make([]codec, 0, len(all))
		for _, c := range all {
			if fc, ok := c.(fileCodec); !ok || fc.holds(sh) == nil {
				fits = append(fits, c)
			}
		}
		m := make(map[shape][]codec, 1)
		if old != nil {
			maps.Copy(m, *old)
		}
		m[sh] = fits
		if s.fits.CompareAndSwap(old, &m) {
			return fits
		}
	}
}

// cannotHold is the 406 of a format that cannot hold a geometry.
func cannotHold(format, why string) *Problem {
	return problem.New(problem.NotAcceptable, "f="+format+" cannot hold "+why)
}

// unrepresentable is the 422 of an answer a format cannot hold although
// its geometry can (a graph with a cycle as SWC).
func unrepresentable(detail string) *Problem { return problem.New(problem.Unrepresentable, detail) }

// exportSetup prepares a file format's answer, when rep is one: the
// Content-Disposition, the attributes it reads, and its exportMeta (nil
// for the payload formats). limit is the most rows the answer may hold.
func (s *Server) exportSetup(ctx context.Context, w http.ResponseWriter, r *http.Request, rep representation, st *zvf.Store, l *zvf.Level, kind string, attrs []string, limit int64) ([]string, *exportMeta, error) {
	fc, ok := rep.codec.(fileCodec)
	if !ok {
		return attrs, nil, nil
	}
	q := query(r)
	sh := shape{kind: kind, geom: geometryOf(st), dims: st.Info().Dims}
	em := &exportMeta{format: fc.format(), geom: sh.geom, axes: st.Info().Axes, maxRows: limit}
	name := st.Name() + "-level" + strconv.Itoa(l.N())
	if kind == "object" {
		id := chi.URLParam(r, "id")
		name = st.Name() + "-object" + id + "-level" + strconv.Itoa(l.N())
		em.source = fmt.Sprintf("store %s, level %d, object %s", st.Name(), l.N(), id)
	} else {
		name += "-bbox"
		em.source = fmt.Sprintf("store %s, level %d, box min=%s max=%s", st.Name(), l.N(), q.Get("min"), q.Get("max"))
		if fc.pages(sh) {
			em.pageable = q.Has("limit") || q.Has("cursor")
		} else if q.Has("cursor") {
			return nil, nil, badRequest("f=" + fc.format() + " answers are not paged (a page could not hold connections to the others); give no cursor")
		}
	}
	if p, ok := rep.codec.(attrPicker); ok {
		attrs = p.pickAttributes(l, attrs)
	}
	if fc.format() == trkCodec.name {
		sp, err := storeTrkSpace(ctx, st)
		if err != nil {
			return nil, nil, err
		}
		em.trk = sp
	}
	if fc.format() == tckCodec.name {
		// TCK is RAS+ mm by definition: only a store in TrackVis voxmm
		// cannot be written as it is.
		if _, err := storeTrkSpace(ctx, st); err != nil {
			return nil, nil, err
		}
	}
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+"."+fc.extension()+`"`)
	return attrs, em, nil
}

// needsConnectivity says why a box's answer in rep cannot leave its edges
// and faces out (connectivity=false), or "" when it can: the file formats
// made of them (all but CSV and a point cloud's PLY, the ones whose page
// is a file of its own), GeoArrow's linestrings, and the Arrow edges and
// faces tables. Without them these answered a file that looked whole but
// was not the data: an SWC of roots, one-point streamlines, meshes of
// loose points.
func needsConnectivity(rep representation, sh shape, am *arrowMeta) string {
	if fc, ok := rep.codec.(fileCodec); ok && !fc.pages(sh) {
		return "f=" + fc.format() + " is made of the answer's connectivity"
	}
	if am != nil && am.geo != nil && !am.geo.pageable {
		return "f=geoarrow's linestrings are made of the answer's edges"
	}
	if am != nil && am.geo == nil && (am.table == tableEdges || am.table == tableFaces) {
		return "table=" + am.table + " is the answer's connectivity"
	}
	return ""
}

// refuseUnpagedBox refuses, before anything is sent, a box whose rows
// would not fit one answer of a streamed file format the client did not
// page: such a format writes rows as they come, so it cannot refuse at
// the end, and a file cut short would look whole. It reads the box's
// vertices once (no attributes, no connectivity) up to the first row past
// the limit; the answer then reads them from the cache.
func refuseUnpagedBox(ctx context.Context, rep representation, l *zvf.Level, zq zvf.BBoxQuery, em *exportMeta) error {
	if em == nil || em.pageable {
		return nil
	}
	if rep.codec.format() != csvCodec.name {
		return nil // the others hold the answer and refuse at its end
	}
	probe := zvf.BBoxQuery{Min: zq.Min, Max: zq.Max, Offset: zq.Offset + zq.Limit, Limit: 1, Selection: zq.Selection} // the rows the answer has: filtered, sampled
	res, err := l.BBox(ctx, probe, func(*zvf.Batch) error { return nil })
	if err != nil {
		return err
	}
	if res.Count > 0 {
		return tooManyRows(rep.codec.format(), zq.Limit, true)
	}
	return nil
}

// tooManyRows is the 413 of an answer with more rows than one file may
// hold.
func tooManyRows(format string, limit int64, pageable bool) *Problem {
	how := "ask for a smaller box or a coarser level"
	if pageable {
		how += ", or page explicitly: give limit= and follow the Link / X-Next-Cursor headers"
	}
	return tooLarge(fmt.Sprintf("the answer holds more than %d vertices, more than one f=%s file may; %s", limit, format, how))
}

// ---- holding an answer whole ----

// held is a whole answer, held for a format that needs all of it before
// it can write (counts in a header, parents from edges, streamlines from
// runs of edges, faces after vertices).
type held struct {
	m         *payloadMeta
	rows      int
	verts     zvf.Column
	ids       []int64 // nil when the level has no object ids
	attrs     []zvf.Column
	edges     []int64
	faces     []int64
	faceWidth int
	// edgeAttrs: the link attributes edge_attributes= asks for, a row an
	// edge (nil when it asks none).
	edgeAttrs []zvf.EdgeColumn
}

// holder is the encoder of the formats that hold the answer: it copies
// every batch (a batch is only valid during its call), and writes the
// file at the end. What it holds is bounded by the answer's limit
// (exportMeta.maxRows, at most --max-vertices): a batch past it is an
// error, never a larger allocation.
type holder struct {
	w     *bufio.Writer
	mem   *answerMem
	a     held
	write func(w *bufio.Writer, a *held) error
}

func (h *holder) begin(w *bufio.Writer, m *payloadMeta, mem *answerMem) error {
	h.w, h.a.m, h.mem = w, m, mem
	return nil
}

func (h *holder) batch(b *zvf.Batch) error {
	em := h.a.m.Export
	if int64(h.a.rows)+int64(b.Rows) > em.maxRows {
		return fmt.Errorf("answer has more than its %d rows", em.maxRows)
	}
	if h.a.verts.Data == nil {
		h.a.verts = b.Vertices
		h.a.verts.Data = make([]byte, 0, len(b.Vertices.Data))
		h.a.attrs = make([]zvf.Column, len(b.Attributes))
		for k := range b.Attributes {
			h.a.attrs[k] = b.Attributes[k]
			h.a.attrs[k].Data = nil
		}
	}
	if len(b.Attributes) != len(h.a.attrs) {
		return fmt.Errorf("batch has %d attribute columns, the answer %d", len(b.Attributes), len(h.a.attrs))
	}
	h.a.verts.Data = append(h.a.verts.Data, b.Vertices.Data...)
	if h.a.m.ObjectIDs && b.ObjectIDs != nil {
		h.a.ids = append(h.a.ids, b.ObjectIDs...)
	}
	for k := range b.Attributes {
		h.a.attrs[k].Data = append(h.a.attrs[k].Data, b.Attributes[k].Data...)
	}
	h.a.rows += b.Rows
	n := int64(cap(h.a.verts.Data) + 8*cap(h.a.ids))
	for k := range h.a.attrs {
		n += int64(cap(h.a.attrs[k].Data))
	}
	h.mem.hold(n)
	return nil
}

func (h *holder) end(t *trailer) error {
	if t.Next != "" && !h.a.m.Export.pageable {
		return tooManyRows(h.a.m.Export.format, h.a.m.Export.maxRows, false)
	}
	if len(h.a.ids) != h.a.rows {
		h.a.ids = nil // not one id a row: none
	}
	h.a.edges, h.a.faces, h.a.faceWidth, h.a.edgeAttrs = t.Edges, t.Faces, t.FaceWidth, t.EdgeAttributes
	if err := checkIndices(h.a.edges, h.a.rows); err != nil {
		return err
	}
	if err := checkIndices(h.a.faces, h.a.rows); err != nil {
		return err
	}
	if h.a.faces != nil && (h.a.faceWidth < 3 || len(h.a.faces)%h.a.faceWidth != 0) {
		return fmt.Errorf("faces of width %d: %d indices", h.a.faceWidth, len(h.a.faces))
	}
	if len(h.a.edges)%2 != 0 {
		return fmt.Errorf("%d edge indices", len(h.a.edges))
	}
	return h.write(h.w, &h.a)
}

// checkIndices checks that connectivity indexes the answer's rows (a
// corrupt store must not make an encoder index out of range).
func checkIndices(v []int64, rows int) error {
	for _, i := range v {
		if i < 0 || i >= int64(rows) {
			return fmt.Errorf("connectivity index %d outside the answer's %d rows", i, rows)
		}
	}
	return nil
}

// ---- numbers ----

// appendNumber appends element i of c as text: integers exactly, floats
// in the shortest form that reads back to the same value at the stored
// precision. Not-a-number is nan, infinities inf and -inf (the caller
// decides where those may not go).
func appendNumber(dst []byte, c *zvf.Column, i int) []byte {
	if c.DType == "float32" {
		v := c.At(i).F
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return appendNonFinite(dst, v)
		}
		return jsonnum.AppendFloat32(dst, float32(v))
	}
	n := c.At(i)
	switch n.Kind {
	case zvf.KindInt:
		return strconv.AppendInt(dst, n.I, 10)
	case zvf.KindUint:
		return strconv.AppendUint(dst, n.U, 10)
	}
	if math.IsNaN(n.F) || math.IsInf(n.F, 0) {
		return appendNonFinite(dst, n.F)
	}
	bits := 64
	if c.DType == "float16" {
		bits = 32 // exact: every float16 is a float32
	}
	return strconv.AppendFloat(dst, n.F, 'g', -1, bits)
}

func appendNonFinite(dst []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(dst, "nan"...)
	case v > 0:
		return append(dst, "inf"...)
	}
	return append(dst, "-inf"...)
}

// float is element i of c as a float64 (integers converted).
func float(c *zvf.Column, i int) float64 {
	n := c.At(i)
	switch n.Kind {
	case zvf.KindInt:
		return float64(n.I)
	case zvf.KindUint:
		return float64(n.U)
	}
	return n.F
}

// columnName is an attribute's name in a format whose names are single
// words: white space and control characters become _.
func columnName(name string) string {
	return strings.Map(func(r rune) rune {
		if r <= ' ' || r == 0x7f {
			return '_'
		}
		return r
	}, name)
}

// channelNames are the names of a column's channels: name itself, or
// name_0, name_1, … for a multi-channel column.
func channelNames(name string, channels int) []string {
	if channels <= 1 {
		return []string{name}
	}
	out := make([]string, channels)
	for k := range out {
		out[k] = name + "_" + strconv.Itoa(k)
	}
	return out
}

// axisNames are the names of the store's axes, x, y, z… where it has
// none.
func axisNames(axes []zvf.Axis, dims int) []string {
	out := make([]string, dims)
	for i := range out {
		if i < len(axes) && axes[i].Name != "" {
			out[i] = axes[i].Name
		} else {
			out[i] = string("xyzw"[min(i, 3)])
			if i > 3 {
				out[i] = "axis" + strconv.Itoa(i)
			}
		}
	}
	return out
}

// only3D is the check of the formats whose points have three coordinates.
func only3D(format string, sh shape) error {
	if sh.dims != 3 {
		return cannotHold(format, fmt.Sprintf("%d-dimensional vertices (it holds x, y, z)", sh.dims))
	}
	return nil
}

// geometryIn is the check of a format that holds some geometries only.
func geometryIn(format string, sh shape, geoms ...string) error {
	if slices.Contains(geoms, sh.geom) {
		return nil
	}
	return cannotHold(format, fmt.Sprintf("a %s store (it holds %s)", sh.geom, orList(geoms)))
}
