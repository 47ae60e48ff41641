package api

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"math"
	"sort"
	"strconv"

	"github.com/zvfserve/zvfserve/api/jsonnum"
	"github.com/zvfserve/zvfserve/zvf"
)

// appendValue appends element i of a column as JSON.
func appendValue(dst []byte, c *zvf.Column, i int) []byte {
	n := c.At(i)
	switch {
	case c.DType == "bool":
		return strconv.AppendBool(dst, n.U != 0)
	case n.Kind == zvf.KindInt:
		return strconv.AppendInt(dst, n.I, 10)
	case n.Kind == zvf.KindUint:
		return strconv.AppendUint(dst, n.U, 10)
	case c.DType == "float64":
		return appendFloat(dst, n.F, 64)
	}
	return appendFloat(dst, n.F, 32)
}

// appendFloat writes the shortest representation that round-trips at the
// stored precision; JSON has no NaN or infinity, so those become null.
func appendFloat(dst []byte, v float64, bits int) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(dst, "null"...)
	}
	return strconv.AppendFloat(dst, v, 'g', -1, bits)
}

func appendCell(dst []byte, c *zvf.Column, row int) []byte {
	if c.Categories != nil {
		if c.Channels <= 1 {
			return appendLabel(dst, c, row)
		}
		// A label a channel, as CSV's name_k columns and Arrow's list.
		dst = append(dst, '[')
		for k := 0; k < c.Channels; k++ {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = appendLabel(dst, c, row*c.Channels+k)
		}
		return append(dst, ']')
	}
	if c.Channels == 1 {
		return appendValue(dst, c, row)
	}
	return appendChannels(dst, c, row)
}

// appendLabel appends the label of element i of a categorical column,
// null for its null code and codes outside its categories.
func appendLabel(dst []byte, c *zvf.Column, i int) []byte {
	if label, ok := categoryLabel(c, i); ok {
		return appendString(dst, label)
	}
	return append(dst, "null"...)
}

// appendChannels appends a row's channels as a JSON array.
func appendChannels(dst []byte, c *zvf.Column, row int) []byte {
	dst = append(dst, '[')
	for k := 0; k < c.Channels; k++ {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = appendValue(dst, c, row*c.Channels+k)
	}
	return append(dst, ']')
}

func appendString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s)
	return append(dst, b...)
}

func appendRow(dst []byte, c *zvf.Column, row int) []byte {
	if c.DType == "float32" {
		// The common case, without the per-value type switch.
		dst = append(dst, '[')
		p := c.Data[row*4*c.Channels:]
		for k := 0; k < c.Channels; k++ {
			if k > 0 {
				dst = append(dst, ',')
			}
			v := math.Float32frombits(binary.LittleEndian.Uint32(p[4*k:]))
			if v != v || v > math.MaxFloat32 || v < -math.MaxFloat32 {
				dst = append(dst, "null"...) // JSON has no NaN or infinity
				continue
			}
			dst = jsonnum.AppendFloat32(dst, v)
		}
		return append(dst, ']')
	}
	return appendChannels(dst, c, row)
}

func appendInts(dst []byte, v []int64) []byte {
	dst = append(dst, '[')
	for i, x := range v {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, x, 10)
	}
	return append(dst, ']')
}

// ---- JSON ----

// jsonEncoder streams one JSON object. Vertices go out as they arrive;
// object ids and attribute values are separate members after the vertex
// list, so they are held as stored (8 bytes an id, an attribute's bytes a
// row: a fraction of their text) and formatted at the end, a round at a
// time; a batch whose chunk has prepared text (rowText) holds which of
// the chunk's rows it had instead, and its attributes are copied from
// their text at the end. What they hold is bounded by the page size
// (jsonCodec.pageRows) and counted in the answer's memory.
type jsonEncoder struct {
	w    *bufio.Writer
	m    *payloadMeta
	mem  *answerMem
	n    int64
	text *batchers
	par  *batcher
	buf  []byte
	vb   zvf.Batch // a batch's vertices, on their way to par
	// cur is the batch write is formatting, and rowsOf, made once, formats
	// its rows: a closure per write would be an allocation per chunk
	// once batches go out as they come (rowFormatter.busy).
	cur    *zvf.Batch
	lead   bool // a comma before cur's first row
	rowsOf func(dst []byte, lo, hi int) []byte
	ids    []int64
	cols   []zvf.Column // each attribute as its batches describe it; Data: its held rows
	// pieces: one per batch with attributes, in order; where a piece's
	// attribute k is prepared text (texts[p.texts+k] != nil), its rows
	// are not in cols[k].Data. sel holds the chunk rows of cut pieces.
	pieces []attrPiece
	texts  []*rowText
	sel    []int32
}

// attrPiece is one batch's rows of the attribute members.
type attrPiece struct {
	rows  int
	all   bool // the chunk's rows [lo, lo+rows), else sel[at : at+rows]
	lo    int
	at    int
	texts int // -1: every attribute's rows are held as bytes
}

// of is the chunk rows p holds.
func (p *attrPiece) of(sel []int32) textRows {
	if p.all {
		return textRows{all: true, lo: p.lo, hi: p.lo + p.rows}
	}
	return textRows{rows: sel[p.at : p.at+p.rows]}
}

func (e *jsonEncoder) begin(w *bufio.Writer, m *payloadMeta, mem *answerMem) error {
	e.w, e.m, e.mem = w, m, mem
	e.cols = make([]zvf.Column, len(m.Attributes))
	e.par.width = vertexWidth(m)
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	// Reuse the meta object's members, then open the vertex list.
	_, err = w.Write(append(b[:len(b)-1], `,"vertices":[`...))
	return err
}

func (e *jsonEncoder) batch(b *zvf.Batch) error {
	if e.m.ObjectIDs {
		e.ids = append(e.ids, b.ObjectIDs...)
	}
	t := preparedText(b)
	if len(e.cols) > 0 {
		e.holdAttributes(b, t != nil)
	}
	e.account()
	if t != nil {
		// The rows held back go first: the answer keeps its order.
		if err := e.par.flush(e.write); err != nil {
			return err
		}
		err := t.writeJSON(e.w, sourceRows(b.Source), e.n > 0)
		e.n += int64(b.Rows)
		return err
	}
	e.vb = zvf.Batch{Chunk: b.Chunk, First: b.First, Rows: b.Rows, Vertices: b.Vertices}
	return e.par.batch(&e.vb, e.write)
}

// holdAttributes keeps b's attribute rows for the end: their chunk's
// prepared text and which rows (prepared: b's vertices have text), or
// else their bytes.
func (e *jsonEncoder) holdAttributes(b *zvf.Batch, prepared bool) {
	p := attrPiece{rows: b.Rows, texts: -1}
	for k := range b.Attributes {
		if k >= len(e.cols) {
			break
		}
		if prepared {
			if t := preparedCells(b, k); t != nil {
				if p.texts < 0 {
					p.texts = len(e.texts)
					e.texts = append(e.texts, make([]*rowText, len(e.cols))...)
				}
				e.texts[p.texts+k] = t
				continue
			}
		}
		c := &b.Attributes[k]
		held := e.cols[k].Data
		if held == nil {
			e.cols[k] = *c
		}
		e.cols[k].Data = append(held, c.Data[:b.Rows*c.RowBytes()]...)
	}
	if p.texts >= 0 {
		sel := sourceRows(b.Source)
		if p.all, p.lo = sel.all, sel.lo; !sel.all {
			p.at = len(e.sel)
			e.sel = append(e.sel, sel.rows...)
		}
	}
	e.pieces = append(e.pieces, p)
}

// account counts what the encoder holds in the answer's memory.
func (e *jsonEncoder) account() {
	if e.mem == nil {
		return
	}
	n := 8*int64(cap(e.ids)) + e.par.size() + 48*int64(cap(e.pieces)) + 8*int64(cap(e.texts)) + 4*int64(cap(e.sel))
	for k := range e.cols {
		n += int64(cap(e.cols[k].Data))
	}
	e.mem.hold(n)
}

// write formats a batch's vertex rows.
func (e *jsonEncoder) write(b *zvf.Batch) error {
	if e.rowsOf == nil {
		e.rowsOf = e.vertexRows
	}
	e.cur, e.lead = b, e.n > 0
	err := e.par.rows.format(e.w, b.Rows, e.par.width, e.rowsOf)
	e.cur = nil
	e.n += int64(b.Rows)
	return err
}

// vertexRows appends rows lo … hi-1 of the batch being written.
func (e *jsonEncoder) vertexRows(dst []byte, lo, hi int) []byte {
	b := e.cur
	for i := lo; i < hi; i++ {
		if e.lead || i > 0 {
			dst = append(dst, ',')
		}
		dst = appendRow(dst, &b.Vertices, i)
	}
	return dst
}

func (e *jsonEncoder) end(t *trailer) error {
	if err := e.par.flush(e.write); err != nil {
		return err
	}
	w, rows := e.w, &e.par.rows
	_ = w.WriteByte(']')
	if e.m.ObjectIDs {
		_, _ = w.WriteString(`,"object_ids":[`)
		ids := e.ids
		err := rows.format(w, len(ids), 21, func(dst []byte, lo, hi int) []byte {
			for i := lo; i < hi; i++ {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = strconv.AppendInt(dst, ids[i], 10)
			}
			return dst
		})
		if err != nil {
			return err
		}
		_ = w.WriteByte(']')
	}
	_, _ = w.WriteString(`,"attributes":{`)
	for k, a := range e.m.Attributes {
		if k > 0 {
			_ = w.WriteByte(',')
		}
		_, _ = w.Write(appendString(e.buf[:0], a.Name))
		_, _ = w.WriteString(":[")
		if err := e.writeAttribute(k, textWidth(a)); err != nil {
			return err
		}
		_ = w.WriteByte(']')
	}
	e.text.put(e.par)
	e.par = nil
	e.ids, e.cols, e.pieces, e.texts, e.sel = nil, nil, nil, nil, nil
	e.mem.hold(0)
	// The edges, their values and the faces may be many: their text goes
	// out as it is made, never whole in memory.
	spill := func(b []byte) []byte {
		if len(b) < spillBytes {
			return b
		}
		_, _ = e.w.Write(b) // a bufio.Writer's error sticks: the last Write below reports it
		return b[:0]
	}
	buf := e.buf[:0]
	buf = append(buf, '}')
	if t.Edges != nil {
		buf = append(buf, `,"edges":`...)
		buf = appendPairs(buf, t.Edges, 2, spill)
	}
	if t.EdgeAttributes != nil {
		buf = append(buf, `,"edge_attributes":`...)
		buf = appendEdgeAttributes(buf, t.EdgeAttributes, spill)
	}
	if t.Faces != nil {
		buf = append(buf, `,"faces":`...)
		buf = appendPairs(buf, t.Faces, t.FaceWidth, spill)
	}
	// Sorted, so equal requests give equal bytes (strong ETags).
	extra := t.extra()
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b, err := json.Marshal(extra[k])
		if err != nil {
			return err
		}
		buf = append(buf, ',')
		buf = appendString(buf, k)
		buf = append(buf, ':')
		buf = append(buf, b...)
	}
	buf = append(buf, `,"count":`...)
	buf = strconv.AppendInt(buf, t.Count, 10)
	buf = append(buf, `,"next":`...)
	if t.Next == "" {
		buf = append(buf, "null"...)
	} else {
		buf = appendString(buf, t.Next)
	}
	buf = append(buf, "}\n"...)
	_, err := e.w.Write(buf)
	return err
}

// writeAttribute writes attribute k's rows, in answer order: runs of
// held rows formatted (on the cores the answer may use), prepared pieces
// copied from their text.
func (e *jsonEncoder) writeAttribute(k, width int) error {
	w, c := e.w, &e.cols[k]
	n := 0
	if rb := c.RowBytes(); rb > 0 {
		n = len(c.Data) / rb
	}
	written, from := 0, 0 // rows written; the first held row not yet written
	held := func(upTo int) error {
		upTo = min(upTo, n)
		if upTo <= from {
			return nil
		}
		lead, start := written > 0, from
		err := e.par.rows.format(w, upTo-from, width, func(dst []byte, lo, hi int) []byte {
			for i := lo; i < hi; i++ {
				if lead || i > 0 {
					dst = append(dst, ',')
				}
				dst = appendCell(dst, c, start+i)
			}
			return dst
		})
		written += upTo - from
		from = upTo
		return err
	}
	at := 0 // held rows up to the current piece
	for i := range e.pieces {
		p := &e.pieces[i]
		if p.texts < 0 || e.texts[p.texts+k] == nil {
			at += p.rows
			continue
		}
		if err := held(at); err != nil {
			return err
		}
		if err := e.texts[p.texts+k].writeJSON(w, p.of(e.sel), written > 0); err != nil {
			return err
		}
		written += p.rows
	}
	return held(n)
}

// appendEdgeAttributes writes {name: [a value per edge]}, values as the
// attributes member writes them, null for an edge without one. spill,
// when not nil, is given the text after each edge and returns what to
// go on appending to: a JSON page writes its text out as it goes.
func appendEdgeAttributes(buf []byte, cols []zvf.EdgeColumn, spill func([]byte) []byte) []byte {
	buf = append(buf, '{')
	for k := range cols {
		c := &cols[k]
		if k > 0 {
			buf = append(buf, ',')
		}
		buf = appendString(buf, c.Name)
		buf = append(buf, ":["...)
		r := 0 // the stored row of the next edge with a value
		for i := range c.Edges() {
			if i > 0 {
				buf = append(buf, ',')
			}
			if !c.Has(i) {
				buf = append(buf, "null"...)
			} else {
				buf = appendCell(buf, &c.Column, r)
				r++
			}
			if spill != nil {
				buf = spill(buf)
			}
		}
		buf = append(buf, ']')
	}
	return append(buf, '}')
}

// appendPairs writes v as a list of lists of w; spill as for
// appendEdgeAttributes.
func appendPairs(buf []byte, v []int64, w int, spill func([]byte) []byte) []byte {
	buf = append(buf, '[')
	for i := 0; i+w <= len(v); i += w {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendInts(buf, v[i:i+w])
		if spill != nil {
			buf = spill(buf)
		}
	}
	return append(buf, ']')
}

// spillBytes is how much text of a page's end a JSON encoder gathers
// before writing it out.
const spillBytes = 16 << 10

// ---- NDJSON ----
