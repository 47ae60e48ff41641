package api

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/go-chi/chi/v5"
	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/zvfserve/zvfserve/zvf"
)

// The Arrow IPC stream format (docs/arrow.md): f=arrow or Accept:
// application/vnd.apache.arrow.stream on the bbox, object and chunk
// routes. One record batch per batch of rows as the reader emits them
// (a chunk's rows), its buffers the batch's own bytes where the Arrow type
// allows (positions, numeric attributes, object ids), then one batch of no
// rows whose custom metadata closes the answer (count, next cursor as
// zvf:next, …): a browser cannot read HTTP trailers, and only the end of
// the answer knows them. table=edges|faces answers the connectivity
// instead, as index columns into the vertex table's rows. The body is
// never compressed inside the stream (Arrow JS cannot read IPC body
// compression); HTTP Content-Encoding compresses it instead.

const arrowMediaType = "application/vnd.apache.arrow.stream"

type arrowCodec struct{}

func (arrowCodec) format() string      { return "arrow" }
func (arrowCodec) contentType() string { return arrowMediaType }
func (arrowCodec) compressible() bool  { return true }
func (arrowCodec) newEncoder() encoder { return &arrowEncoder{} }

// pageRows: a vertex table holds nothing of a row past its batch, and a
// connectivity table holds what the reader already has (its edges).
func (arrowCodec) pageRows(*payloadMeta) int64 { return 0 }

// Tables an Arrow answer can hold (table=).
const (
	tableVertices = "vertices"
	tableEdges    = "edges"
	tableFaces    = "faces"
)

// maxIndexBatch bounds the rows of one record batch of an edges or faces
// table (its scratch columns are reused from batch to batch).
const maxIndexBatch = 1 << 16

// arrowMeta is what the Arrow encoders need beyond payloadMeta.
type arrowMeta struct {
	table string // tableVertices, tableEdges or tableFaces
	geo   *geoMeta
}

// arrowColumn is how one column of zvf rows becomes an Arrow column: its
// element type, wrapped in a FixedSizeList for more than one channel.
type arrowColumn struct {
	name     string
	channels int
	list     bool           // a FixedSizeList (more than one channel, or positions)
	size     int            // bytes of one element in the zvf column
	elem     arrow.DataType // numeric, boolean or dictionary
	typ      arrow.DataType // elem, or FixedSizeList<elem>[channels]
	dict     *array.Data    // the labels of a dictionary column, sent once
	// scratch reused from batch to batch (the IPC writer has copied a
	// batch's buffers out when Write returns)
	bits, idx []byte
	// rows: a batch's edge values with a zero row for each edge without
	// one, which Arrow's fixed-size lists keep a place for
	rows []byte
}

// arrowNumeric is Arrow's type for a numeric Zarr data type.
func arrowNumeric(dtype string) (arrow.DataType, bool) {
	switch dtype {
	case "int8":
		return arrow.PrimitiveTypes.Int8, true
	case "int16":
		return arrow.PrimitiveTypes.Int16, true
	case "int32":
		return arrow.PrimitiveTypes.Int32, true
	case "int64":
		return arrow.PrimitiveTypes.Int64, true
	case "uint8":
		return arrow.PrimitiveTypes.Uint8, true
	case "uint16":
		return arrow.PrimitiveTypes.Uint16, true
	case "uint32":
		return arrow.PrimitiveTypes.Uint32, true
	case "uint64":
		return arrow.PrimitiveTypes.Uint64, true
	case "float16":
		return arrow.FixedWidthTypes.Float16, true
	case "float32":
		return arrow.PrimitiveTypes.Float32, true
	case "float64":
		return arrow.PrimitiveTypes.Float64, true
	}
	return nil, false
}

// newArrowColumn plans the Arrow column of a zvf column described by a:
// a data type Arrow has no type for (complex numbers) is a 406.
func newArrowColumn(a zvf.AttrInfo) (*arrowColumn, error) {
	c := &arrowColumn{name: a.Name, channels: max(a.Channels, 1)}
	switch {
	case a.Categories != nil:
		if t, ok := arrowNumeric(a.DType); !ok || !arrow.IsInteger(t.ID()) {
			return nil, notAcceptable(fmt.Sprintf("categorical column %q has %s codes; Arrow dictionaries need integer codes", a.Name, a.DType))
		}
		// Every categorical column: int32 codes into UTF-8 labels.
		c.elem = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
		b := array.NewStringBuilder(memory.DefaultAllocator)
		for _, s := range a.Categories {
			b.Append(s)
		}
		labels := b.NewStringArray()
		b.Release()
		c.dict = labels.Data().(*array.Data)
		c.dict.Retain()
		labels.Release()
	case a.DType == "bool":
		c.elem = arrow.FixedWidthTypes.Boolean
	default:
		t, ok := arrowNumeric(a.DType)
		if !ok {
			return nil, notAcceptable(fmt.Sprintf("column %q is %s, which Arrow has no type for; use f=bin or f=json", a.Name, a.DType))
		}
		c.elem = t
	}
	c.size = dtypeSize(a.DType)
	c.typ = c.elem
	if c.channels > 1 {
		c.asList()
	}
	return c, nil
}

// asList makes the column a FixedSizeList<elem>[channels], even of one
// channel (positions are lists whatever the store's dimensions).
func (c *arrowColumn) asList() {
	c.list = true
	c.typ = arrow.FixedSizeListOfNonNullable(int32(c.channels), c.elem)
}

// dtypeSize is the size in bytes of one element of a fixed-size Zarr
// data type.
func dtypeSize(dtype string) int {
	switch dtype {
	case "bool", "int8", "uint8":
		return 1
	case "int16", "uint16", "float16":
		return 2
	case "int32", "uint32", "float32":
		return 4
	}
	return 8
}

// release drops the column's labels.
func (c *arrowColumn) release() {
	if c.dict != nil {
		c.dict.Release()
		c.dict = nil
	}
}

// data builds the column over rows rows of col (its bytes, not copied
// where the type allows). valid, when not nil, is a validity bitmap of
// the rows with nulls of them null (a row without a value).
func (c *arrowColumn) data(col *zvf.Column, rows int, valid []byte, nulls int) (*array.Data, error) {
	n := rows * c.channels
	if len(col.Data) != n*c.size {
		return nil, fmt.Errorf("column %q: %d bytes for %d rows of %d × %d bytes", c.name, len(col.Data), rows, c.channels, c.size)
	}
	var elems *array.Data
	switch c.elem.ID() {
	case arrow.DICTIONARY:
		c.idx = grow(c.idx, 4*n)
		idx := arrow.Int32Traits.CastFromBytes(c.idx)
		c.bits = grow(c.bits, bitmapBytes(n))
		clear(c.bits)
		bad := 0
		for i := range n {
			v := col.At(i)
			code := v.I
			if v.Kind != zvf.KindInt {
				code = int64(min(v.U, math.MaxInt64))
			}
			// A row without a value (valid, one element a row when not a
			// list) is null in the dictionary's own bitmap.
			noRow := valid != nil && !c.list && valid[i>>3]&(1<<(i&7)) == 0
			if noRow || (col.NullCode != nil && code == *col.NullCode) || code < 0 || code >= int64(len(col.Categories)) || code >= int64(c.dict.Len()) {
				idx[i] = 0
				bad++
				continue
			}
			idx[i] = int32(code)
			c.bits[i>>3] |= 1 << (i & 7)
		}
		var vb *memory.Buffer
		if bad > 0 {
			vb = memory.NewBufferBytes(c.bits)
		}
		elems = array.NewDataWithDictionary(c.elem, n, []*memory.Buffer{vb, memory.NewBufferBytes(c.idx)}, bad, 0, c.dict)
	case arrow.BOOL:
		c.bits = grow(c.bits, bitmapBytes(n))
		clear(c.bits)
		for i, v := range col.Data {
			if v != 0 {
				c.bits[i>>3] |= 1 << (i & 7)
			}
		}
		elems = array.NewData(c.elem, n, []*memory.Buffer{nil, memory.NewBufferBytes(c.bits)}, nil, 0, 0)
	default:
		elems = array.NewData(c.elem, n, []*memory.Buffer{nil, memory.NewBufferBytes(col.Data)}, nil, 0, 0)
	}
	var vb *memory.Buffer
	if valid != nil && nulls > 0 {
		vb = memory.NewBufferBytes(valid)
	} else {
		nulls = 0
	}
	if !c.list {
		if vb == nil || c.elem.ID() == arrow.DICTIONARY {
			return elems, nil // a dictionary's row nulls are in its bitmap
		}
		bufs := elems.Buffers()
		out := array.NewData(c.elem, n, []*memory.Buffer{vb, bufs[1]}, nil, nulls, 0)
		elems.Release()
		return out, nil
	}
	out := array.NewData(c.typ, rows, []*memory.Buffer{vb}, []arrow.ArrayData{elems}, nulls, 0)
	elems.Release()
	return out, nil
}

// empty is the column with no rows (the closing batch).
func (c *arrowColumn) empty() *array.Data {
	var elems *array.Data
	switch c.elem.ID() {
	case arrow.DICTIONARY:
		elems = array.NewDataWithDictionary(c.elem, 0, []*memory.Buffer{nil, memory.NewBufferBytes(nil)}, 0, 0, c.dict)
	default:
		elems = array.NewData(c.elem, 0, []*memory.Buffer{nil, memory.NewBufferBytes(nil)}, nil, 0, 0)
	}
	if !c.list {
		return elems
	}
	out := array.NewData(c.typ, 0, []*memory.Buffer{nil}, []arrow.ArrayData{elems}, 0, 0)
	elems.Release()
	return out
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

func bitmapBytes(n int) int { return (n + 7) / 8 }

// arrowWriter is an IPC stream writer and its schema. The first record
// batch and the closing one go through arrow-go's writer, which sends the
// schema and the dictionaries first; the batches in between, the bulk of
// an answer, are written here: a RecordBatch message built with a reused
// flatbuffers builder, then the columns' buffers as they are, so a batch
// costs its bytes and no allocation (the IPC writer builds and allocates
// a message's metadata anew for each batch).
type arrowWriter struct {
	schema  *arrow.Schema
	w       *ipc.Writer
	out     *bufio.Writer
	started bool
	cols    []arrow.Array // the batch being written
	fb      *flatbuffers.Builder
	nodes   [][2]int64 // field nodes: length, null count
	bufs    [][]byte   // body buffers, nil for an absent one
	offs    []int64    // their offsets in the body
	hdr     [8]byte
	zeros   [ipcBodyAlignment]byte
}

func newArrowWriter(w *bufio.Writer, fields []arrow.Field, meta *payloadMeta) (*arrowWriter, error) {
	b, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	md := arrow.NewMetadata([]string{"zvf:meta"}, []string{string(b)})
	schema := arrow.NewSchema(fields, &md)
	// No IPC body compression (browsers' Arrow cannot read it).
	return &arrowWriter{schema: schema, out: w, w: ipc.NewWriter(w, ipc.WithSchema(schema), ipc.WithAllocator(memory.DefaultAllocator))}, nil
}

// write sends one record batch of rows rows made of data (consumed: each
// is released), with custom metadata md when not nil. A panic of the
// Arrow library on inconsistent columns is an error, not a crash.
func (aw *arrowWriter) write(data []*array.Data, rows int, md map[string]string) (err error) {
	if aw.started && md == nil {
		return aw.writeBatch(data, rows)
	}
	aw.started = true
	aw.cols = aw.cols[:0]
	defer func() {
		for _, c := range aw.cols {
			c.Release()
		}
		if p := recover(); p != nil {
			err = fmt.Errorf("arrow record batch: %v", p)
		}
	}()
	for _, d := range data {
		aw.cols = append(aw.cols, array.MakeFromData(d))
		d.Release()
	}
	var rec arrow.RecordBatch
	if md != nil {
		rec = array.NewRecordBatchWithMetadata(aw.schema, aw.cols, int64(rows), arrow.MetadataFrom(md))
	} else {
		rec = array.NewRecordBatch(aw.schema, aw.cols, int64(rows))
	}
	defer rec.Release()
	return aw.w.Write(rec)
}

// Arrow IPC constants (Message.fbs, Schema.fbs; the stream format).
const (
	ipcContinuation  = 0xFFFFFFFF
	ipcMetadataV5    = 4 // MetadataVersion.V5
	ipcRecordBatch   = 3 // MessageHeader.RecordBatch
	ipcBodyAlignment = 8
)

// writeBatch writes a RecordBatch message of data (consumed) and its
// body. Its layout is the columns' own: each node's length and null
// count, depth first, and each node's buffers in order (an absent
// validity buffer has length 0), every buffer padded to 8 bytes.
func (aw *arrowWriter) writeBatch(data []*array.Data, rows int) error {
	aw.nodes, aw.bufs = aw.nodes[:0], aw.bufs[:0]
	for _, d := range data {
		aw.flatten(d)
	}
	defer releaseAll(data)
	if aw.fb == nil {
		aw.fb = flatbuffers.NewBuilder(1024)
	}
	b := aw.fb
	b.Reset()
	// Vectors of structs are written back to front.
	var body int64
	aw.offs = aw.offs[:0]
	for _, buf := range aw.bufs {
		aw.offs = append(aw.offs, body)
		body += int64(padded(len(buf)))
	}
	b.StartVector(16, len(aw.bufs), 8)
	for k := len(aw.bufs) - 1; k >= 0; k-- {
		b.Prep(8, 16)
		b.PrependInt64(int64(len(aw.bufs[k])))
		b.PrependInt64(aw.offs[k])
	}
	buffers := b.EndVector(len(aw.bufs))
	b.StartVector(16, len(aw.nodes), 8)
	for k := len(aw.nodes) - 1; k >= 0; k-- {
		b.Prep(8, 16)
		b.PrependInt64(aw.nodes[k][1])
		b.PrependInt64(aw.nodes[k][0])
	}
	nodes := b.EndVector(len(aw.nodes))
	b.StartObject(5) // RecordBatch: length, nodes, buffers, compression, variadicBufferCounts
	b.PrependInt64Slot(0, int64(rows), 0)
	b.PrependUOffsetTSlot(1, nodes, 0)
	b.PrependUOffsetTSlot(2, buffers, 0)
	rb := b.EndObject()
	b.StartObject(5) // Message: version, header_type, header, bodyLength, custom_metadata
	b.PrependInt16Slot(0, ipcMetadataV5, 0)
	b.PrependByteSlot(1, ipcRecordBatch, 0)
	b.PrependUOffsetTSlot(2, rb, 0)
	b.PrependInt64Slot(3, body, 0)
	b.Finish(b.EndObject())
	meta := b.FinishedBytes()
	// Continuation, metadata length (padded so the body starts aligned),
	// metadata, padding, body.
	mlen := padded(len(meta))
	binary.LittleEndian.PutUint32(aw.hdr[0:], ipcContinuation)
	binary.LittleEndian.PutUint32(aw.hdr[4:], uint32(mlen))
	if _, err := aw.out.Write(aw.hdr[:]); err != nil {
		return err
	}
	if _, err := aw.out.Write(meta); err != nil {
		return err
	}
	if err := aw.pad(mlen - len(meta)); err != nil {
		return err
	}
	for _, buf := range aw.bufs {
		if _, err := aw.out.Write(buf); err != nil {
			return err
		}
		if err := aw.pad(padded(len(buf)) - len(buf)); err != nil {
			return err
		}
	}
	return nil
}

// flatten lists d's field nodes and buffers, depth first.
func (aw *arrowWriter) flatten(d arrow.ArrayData) {
	aw.nodes = append(aw.nodes, [2]int64{int64(d.Len()), int64(d.NullN())})
	for _, buf := range d.Buffers() {
		if buf == nil {
			aw.bufs = append(aw.bufs, nil)
			continue
		}
		aw.bufs = append(aw.bufs, buf.Bytes())
	}
	for _, c := range d.Children() {
		aw.flatten(c)
	}
}

func (aw *arrowWriter) pad(n int) error {
	_, err := aw.out.Write(aw.zeros[:n])
	return err
}

func padded(n int) int { return (n + ipcBodyAlignment - 1) / ipcBodyAlignment * ipcBodyAlignment }

// closingMetadata is the custom metadata of an answer's last record
// batch: what the other formats' trailer holds. zvf:next is the cursor
// itself (absent on the last page); every other value is JSON.
func closingMetadata(t *trailer) (map[string]string, error) {
	md := map[string]string{"zvf:count": strconv.FormatInt(t.Count, 10)}
	if t.Next != "" {
		md["zvf:next"] = t.Next
	}
	for k, v := range t.extra() {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		md["zvf:"+k] = string(b)
	}
	return md, nil
}

// arrowEncoder writes the vertex table (a batch per reader batch) or,
// with table=edges|faces, the connectivity table at the end.
type arrowEncoder struct {
	w     *bufio.Writer
	m     *payloadMeta
	table string
	aw    *arrowWriter
	pos   *arrowColumn
	attrs []*arrowColumn
	data  []*array.Data
}

func (e *arrowEncoder) begin(w *bufio.Writer, m *payloadMeta, _ *answerMem) error {
	e.w, e.m, e.table = w, m, tableVertices
	if m.Arrow != nil && m.Arrow.table != "" {
		e.table = m.Arrow.table
	}
	if e.table != tableVertices {
		return nil // the index tables' schema waits for the end (corners per face)
	}
	var fields []arrow.Field
	{
		pos, err := newArrowColumn(zvf.AttrInfo{Name: "position", DType: m.VertexDType, Channels: m.Dims})
		if err != nil {
			return err
		}
		if pos.elem.ID() == arrow.BOOL {
			return notAcceptable("positions of bool: Arrow positions need a numeric type")
		}
		pos.asList()
		e.pos = pos
		fields = append(fields, arrow.Field{Name: "position", Type: pos.typ})
		if m.ObjectIDs {
			fields = append(fields, arrow.Field{Name: "object_id", Type: arrow.PrimitiveTypes.Int64})
		}
		for _, a := range m.Attributes {
			c, err := newArrowColumn(a)
			if err != nil {
				e.release()
				return err
			}
			e.attrs = append(e.attrs, c)
			fields = append(fields, arrow.Field{Name: a.Name, Type: c.typ, Nullable: c.elem.ID() == arrow.DICTIONARY})
		}
	}
	aw, err := newArrowWriter(w, fields, m)
	if err != nil {
		e.release()
		return err
	}
	e.aw = aw
	return nil
}

func (e *arrowEncoder) release() {
	if e.pos != nil {
		e.pos.release()
	}
	for _, c := range e.attrs {
		c.release()
	}
}

// indexFields are the columns of an edges or faces table: v0, v1, … as
// uint32 row indices.
func indexFields(width int) []arrow.Field {
	fs := make([]arrow.Field, width)
	for k := range fs {
		fs[k] = arrow.Field{Name: "v" + strconv.Itoa(k), Type: arrow.PrimitiveTypes.Uint32}
	}
	return fs
}

func (e *arrowEncoder) batch(b *zvf.Batch) error {
	if e.table != tableVertices {
		return nil
	}
	e.data = e.data[:0]
	d, err := e.pos.data(&b.Vertices, b.Rows, nil, 0)
	if err != nil {
		return err
	}
	e.data = append(e.data, d)
	if e.m.ObjectIDs {
		if len(b.ObjectIDs) != b.Rows {
			e.releaseData()
			return fmt.Errorf("batch of %d rows has %d object ids", b.Rows, len(b.ObjectIDs))
		}
		e.data = append(e.data, array.NewData(arrow.PrimitiveTypes.Int64, b.Rows,
			[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(b.ObjectIDs))}, nil, 0, 0))
	}
	if len(b.Attributes) != len(e.attrs) {
		e.releaseData()
		return fmt.Errorf("batch has %d attribute columns, the answer %d", len(b.Attributes), len(e.attrs))
	}
	for k, c := range e.attrs {
		if b.Attributes[k].Channels != c.channels {
			e.releaseData()
			return fmt.Errorf("attribute %q: %d channels in this batch, %d in the answer", c.name, b.Attributes[k].Channels, c.channels)
		}
		d, err := c.data(&b.Attributes[k], b.Rows, nil, 0)
		if err != nil {
			e.releaseData()
			return err
		}
		e.data = append(e.data, d)
	}
	return e.aw.write(e.data, b.Rows, nil)
}

func (e *arrowEncoder) releaseData() {
	for _, d := range e.data {
		d.Release()
	}
	e.data = e.data[:0]
}

func (e *arrowEncoder) end(t *trailer) error {
	defer e.release()
	md, err := closingMetadata(t)
	if err != nil {
		return err
	}
	e.data = e.data[:0]
	switch e.table {
	case tableVertices:
		e.data = append(e.data, e.pos.empty())
		if e.m.ObjectIDs {
			e.data = append(e.data, emptyInts(arrow.PrimitiveTypes.Int64))
		}
		for _, c := range e.attrs {
			e.data = append(e.data, c.empty())
		}
	default:
		v, width := t.Edges, 2
		if e.table == tableFaces {
			v, width = t.Faces, t.FaceWidth
			if width == 0 {
				width = 3 // no faces in the answer: triangles, the usual mesh
			}
		}
		fields := indexFields(width)
		var cols []*arrowColumn // table=edges: a column per link attribute asked for
		defer func() {
			for _, c := range cols {
				c.release()
			}
		}()
		if e.table == tableEdges {
			for _, a := range t.EdgeAttributes {
				c, err := newArrowColumn(zvf.AttrInfo{Name: a.Name, DType: a.DType, Channels: a.Channels, Categories: a.Categories})
				if err != nil {
					return err
				}
				cols = append(cols, c)
				fields = append(fields, arrow.Field{Name: a.Name, Type: c.typ, Nullable: true})
			}
		}
		if e.aw, err = newArrowWriter(e.w, fields, e.m); err != nil {
			return err
		}
		if err := e.writeIndices(v, width, t.EdgeAttributes, cols); err != nil {
			return err
		}
		md["zvf:"+e.table] = strconv.Itoa(len(v) / width)
		for range width {
			e.data = append(e.data, emptyInts(arrow.PrimitiveTypes.Uint32))
		}
		for _, c := range cols {
			e.data = append(e.data, c.empty())
		}
	}
	if err := e.aw.write(e.data, 0, md); err != nil {
		return err
	}
	return e.aw.w.Close()
}

// edgeValues is rows lo … hi-1 of an edge attribute as c's column, an
// edge without a value null (its place zeros, as Arrow keeps one).
func edgeValues(c *arrowColumn, v *zvf.EdgeColumn, lo, hi int) (*array.Data, error) {
	rb := v.RowBytes()
	if v.Edges() < hi {
		return nil, fmt.Errorf("edge attribute %q: values for %d edges, not %d", v.Name, v.Edges(), hi)
	}
	part := v.Column
	if v.Valid == nil {
		part.Data = v.Data[lo*rb : hi*rb]
		return c.data(&part, hi-lo, nil, 0)
	}
	valid := make([]byte, bitmapBytes(hi-lo))
	c.rows = grow(c.rows, (hi-lo)*rb)
	nulls := 0
	r := -1 // the stored row of edge i, once found
	for i := lo; i < hi; i++ {
		dst := c.rows[(i-lo)*rb : (i-lo+1)*rb]
		if !v.Valid[i] {
			clear(dst)
			nulls++
			continue
		}
		if r < 0 {
			r = v.StoredRow(i)
		}
		copy(dst, v.Data[r*rb:(r+1)*rb])
		r++
		valid[(i-lo)>>3] |= 1 << ((i - lo) & 7)
	}
	part.Data = c.rows
	return c.data(&part, hi-lo, valid, nulls)
}

func emptyInts(t arrow.DataType) *array.Data {
	return array.NewData(t, 0, []*memory.Buffer{nil, memory.NewBufferBytes(nil)}, nil, 0, 0)
}

// writeIndices writes connectivity (width indices a row) as uint32
// columns, maxIndexBatch rows a record batch, each followed by the rows
// of vals (a row per connection) in the columns cols. An index past
// uint32 (an answer of over 4 billion rows: indices count the whole
// answer, all pages) is an error, never a wrapped index.
func (e *arrowEncoder) writeIndices(v []int64, width int, vals []zvf.EdgeColumn, attrCols []*arrowColumn) error {
	if width <= 0 || len(v)%width != 0 {
		return fmt.Errorf("%d indices in rows of %d", len(v), width)
	}
	rows := len(v) / width
	cols := make([][]byte, width)
	for lo := 0; lo < rows; lo += maxIndexBatch {
		hi := min(lo+maxIndexBatch, rows)
		e.data = e.data[:0]
		for k := range cols {
			cols[k] = grow(cols[k], 4*(hi-lo))
			out := arrow.Uint32Traits.CastFromBytes(cols[k])
			for i := lo; i < hi; i++ {
				x := v[i*width+k]
				if x < 0 || x > math.MaxUint32 {
					e.releaseData()
					return unrepresentable(fmt.Sprintf("connectivity index %d does not fit Arrow's uint32 index columns; f=json carries 64-bit indices", x))
				}
				out[i-lo] = uint32(x)
			}
			e.data = append(e.data, array.NewData(arrow.PrimitiveTypes.Uint32, hi-lo,
				[]*memory.Buffer{nil, memory.NewBufferBytes(cols[k])}, nil, 0, 0))
		}
		for k, c := range attrCols {
			d, err := edgeValues(c, &vals[k], lo, hi)
			if err != nil {
				e.releaseData()
				return err
			}
			e.data = append(e.data, d)
		}
		if err := e.aw.write(e.data, hi-lo, nil); err != nil {
			return err
		}
	}
	e.data = e.data[:0]
	return nil
}

// arrowSetup checks what an Arrow or GeoArrow answer of the bbox or object
// route needs (table=, the geometry and dimensions GeoArrow holds) before
// any work, and returns its arrowMeta (nil for the other formats) and the
// attributes to read. limit is the most rows the answer may hold.
func arrowSetup(r *http.Request, rep representation, st *zvf.Store, l *zvf.Level, attrs []string, limit int64) (*arrowMeta, []string, error) {
	q := query(r)
	table := q.Get("table")
	geom := geometryOf(st)
	switch rep.codec.(type) {
	case arrowCodec:
		am := &arrowMeta{table: tableVertices}
		switch table {
		case tableEdges:
			if geoKind(geom, true, false) != geoMultiLineString {
				return nil, nil, badRequest(fmt.Sprintf("table=edges: a %s store has no edges (table=vertices%s)", geom, orFaces(geom)))
			}
		case tableFaces:
			if geom != "mesh" {
				return nil, nil, badRequest(fmt.Sprintf("table=faces: a %s store has no faces (table=vertices%s)", geom, orEdges(geom)))
			}
		}
		if table != "" && table != tableVertices {
			am.table = table
			attrs = nil // the index tables hold no attributes
		}
		return am, attrs, nil
	case geoarrowCodec:
		if table != "" {
			return nil, nil, badRequest("table= chooses a table of f=arrow; f=geoarrow is one table, of objects")
		}
		dims := st.Info().Dims
		objects := l.Info().ObjectCount > 0 || chi.URLParam(r, "id") != ""
		kind := geoKind(geom, objects, chi.URLParam(r, "id") != "")
		if kind == "" {
			return nil, nil, notAcceptable(fmt.Sprintf("f=geoarrow cannot hold a %s store (points and lines only); use f=arrow", geom))
		}
		if dims < 2 || dims > 3 {
			return nil, nil, notAcceptable(fmt.Sprintf("f=geoarrow holds 2 or 3 dimensions, not %d; use f=arrow", dims))
		}
		g := &geoMeta{geom: geom, objectID: -1, pageable: geom == "point_cloud", maxRows: limit, batchCoords: geoBatchCoords,
			objectAttrs: l.Info().ObjectAttributes}
		if !g.pageable && q.Has("cursor") {
			return nil, nil, badRequest("f=geoarrow answers of lines are not paged (a page's edges reach rows of the pages before it); give no cursor")
		}
		if kind != geoPoint {
			if attrs != nil {
				return nil, nil, badRequest("f=geoarrow has a row per object: vertex attributes have no place in it (they come with f=arrow); give no attributes=")
			}
			ctx := r.Context()
			g.attrsOf = func(id int64) ([]zvf.Column, error) { return l.ObjectAttributes(ctx, id) }
		}
		return &arrowMeta{table: tableVertices, geo: g}, attrs, nil
	}
	if table != "" {
		return nil, nil, badRequest(fmt.Sprintf("table= chooses a table of f=arrow, not of f=%s", rep.codec.format()))
	}
	return nil, attrs, nil
}

func orFaces(geom string) string {
	if geom == "mesh" {
		return " or table=faces"
	}
	return ""
}

func orEdges(geom string) string {
	if geoKind(geom, true, false) == geoMultiLineString {
		return " or table=edges"
	}
	return ""
}
