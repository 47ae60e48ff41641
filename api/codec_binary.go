package api

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/zvfserve/zvfserve/zvf"
)

// Block kinds of the binary format (docs/binary-format.md).
const (
	blockVertices  = 1
	blockObjectIDs = 2
	blockAttribute = 3
	blockEdges     = 4
	blockFaces     = 5
	blockQuantized = 6
	blockEdgeAttr  = 7
	blockTrailer   = 15
)

// binaryMagic opens every binary answer.
const binaryMagic = "ZVFBIN\x00\x01"

type binaryEncoder struct {
	w   *bufio.Writer
	m   *payloadMeta
	mem *answerMem
	// precision, when over 0 (precision=), sends vertices as kind 6
	// blocks, built by quant.
	precision float64
	quant     quantizer
	hdr       [16]byte
	buf       []byte    // one block's payload being built (ids, edges, faces)
	pad       [8]byte   // zeros to pad a block to 8 bytes (a field: a local escapes to the writer)
	small     [256]byte // backs buf for the trailer of an answer that needed no larger block
	// inPlace counts the payload bytes written where they already lay
	// (VertexSpace), which no copy moved into the body; tests read it.
	inPlace int64
	// lent says VertexSpace lent space since the last block: only then
	// may a payload lie in place (an auto answer's hundreds of small
	// blocks are never lent, and skip the address test).
	lent bool
}

// VertexSpace lends the reader the body buffer's free space past a
// block header (zvf.VertexDst): the rows of a chunk the box cuts are
// matched straight into the body, and writeBlock writes them there, not
// from a buffer of the reader. nil when the space is short (the batch is
// then written as before) or the answer quantizes its vertices.
func (e *binaryEncoder) VertexSpace(n int) []byte {
	if e.precision > 0 || e.w.Available() < 16+n+8 { // writeBlock's room: header, payload, 8 bytes of padding
		return nil
	}
	e.lent = true
	return e.w.AvailableBuffer()[16:16]
}

// inPlaceAt reports whether payload lies past a block header's place in
// b, the writer's free space (lent by VertexSpace), and ends the loan.
func (e *binaryEncoder) inPlaceAt(b, payload []byte) bool {
	e.lent = false
	return len(payload) > 0 && &b[:17][16] == &payload[0]
}

func (e *binaryEncoder) writeBlock(kind, aux uint32, payload []byte) error {
	pad := (8 - len(payload)%8) % 8
	if n := 16 + len(payload); n+8 <= e.w.Available() {
		// One write of header, payload and padding, put in place in the
		// writer's free space: an answer at a coarse level is many
		// blocks of a few rows each, and three writes (or appends, each
		// checking room) cost more than the rows.
		b := e.w.AvailableBuffer()[:n+8]
		if e.lent && e.inPlaceAt(b, payload) {
			// The payload lies past the header's place already (lent by
			// VertexSpace): the header and the padding go around it.
			e.inPlace += int64(len(payload))
		} else {
			copy(b[16:n], payload)
		}
		binary.LittleEndian.PutUint32(b[0:], kind)
		binary.LittleEndian.PutUint32(b[4:], aux)
		binary.LittleEndian.PutUint64(b[8:], uint64(len(payload)))
		binary.LittleEndian.PutUint64(b[n:], 0) // the padding's zeros, and up to 7 bytes of free space
		_, err := e.w.Write(b[:n+pad])
		return err
	}
	binary.LittleEndian.PutUint32(e.hdr[0:], kind)
	binary.LittleEndian.PutUint32(e.hdr[4:], aux)
	binary.LittleEndian.PutUint64(e.hdr[8:], uint64(len(payload)))
	if _, err := e.w.Write(e.hdr[:]); err != nil {
		return err
	}
	if _, err := e.w.Write(payload); err != nil {
		return err
	}
	if pad > 0 {
		_, err := e.w.Write(e.pad[:pad])
		return err
	}
	return nil
}

func (e *binaryEncoder) begin(w *bufio.Writer, m *payloadMeta, mem *answerMem) error {
	e.w, e.m, e.mem = w, m, mem
	b, err := appendMeta(e.small[:0], m) // small is free until the trailer
	if err != nil {
		return err
	}
	if _, err := w.WriteString(binaryMagic); err != nil {
		return err
	}
	// The length in hdr, not a local: a local escapes to the writer.
	binary.LittleEndian.PutUint64(e.hdr[:8], uint64(len(b)))
	if _, err := w.Write(e.hdr[:8]); err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	_, err = w.Write(e.pad[:(8-len(b)%8)%8])
	return err
}

func (e *binaryEncoder) batch(b *zvf.Batch) error {
	if err := e.vertices(b); err != nil {
		return err
	}
	if e.m.ObjectIDs && b.WireIDs != nil {
		if err := e.writeBlock(blockObjectIDs, uint32(b.Rows), b.WireIDs); err != nil {
			return err
		}
	} else if e.m.ObjectIDs && b.ObjectIDs != nil {
		// Into a local, stored once: a store to e.buf per id would take
		// a write barrier each while the GC runs.
		buf := slices.Grow(e.buf[:0], 8*len(b.ObjectIDs))[:8*len(b.ObjectIDs)]
		for i, id := range b.ObjectIDs {
			binary.LittleEndian.PutUint64(buf[8*i:], uint64(id))
		}
		e.buf = buf
		if err := e.writeBlock(blockObjectIDs, uint32(b.Rows), buf); err != nil {
			return err
		}
	}
	for k := range b.Attributes {
		if err := e.writeBlock(blockAttribute, uint32(k), b.Attributes[k].Data); err != nil {
			return err
		}
	}
	return nil
}

// vertices writes a batch's vertices block: kind 6 when the answer asked
// for a precision and the batch can be quantized to it, else kind 1.
func (e *binaryEncoder) vertices(b *zvf.Batch) error {
	if e.precision > 0 {
		if payload, bits, ok := e.quant.quantize(&b.Vertices, b.Rows, b.Vertices.Channels, e.precision); ok {
			e.mem.hold(int64(cap(e.quant.out) + 8*cap(e.quant.axis) + 4*cap(e.quant.cells)))
			return e.writeBlock(blockQuantized, uint32(bits), payload)
		}
	}
	return e.writeBlock(blockVertices, uint32(b.Rows), b.Vertices.Data)
}

// appendIndices appends connectivity indices as uint32; an index past
// that (an answer of over 4 billion rows: indices count the whole
// answer, all pages) is an error, never a wrapped index.
func appendIndices(dst []byte, v []int64) ([]byte, error) {
	for _, x := range v {
		if x < 0 || x > math.MaxUint32 {
			return dst, indexError(x)
		}
		dst = binary.LittleEndian.AppendUint32(dst, uint32(x))
	}
	return dst, nil
}

// indexError is a 422 unrepresentable problem: the answer is fine, the
// binary format cannot carry it (it was an untyped error, a 500).
func indexError(x int64) error {
	return unrepresentable(fmt.Sprintf("connectivity index %d does not fit the binary format's uint32; f=json carries 64-bit indices", x))
}

// indexPiece is how many connectivity indices writeIndices converts at a
// time: an answer's edges go out through a small buffer, not one the size
// of the whole list.
const indexPiece = 8192

// writeIndices writes a block of connectivity indices as uint32 (see
// appendIndices), converted piece by piece.
func (e *binaryEncoder) writeIndices(kind, aux uint32, v []int64) error {
	// Checked first: an error must come before the block starts. One OR
	// over all (an index below 0 or past uint32 sets a high bit), and a
	// search only when some index is out.
	var high uint64
	for _, x := range v {
		high |= uint64(x)
	}
	if high > math.MaxUint32 {
		if _, err := appendIndices(nil, v); err != nil {
			return err
		}
	}
	n := 4 * len(v)
	binary.LittleEndian.PutUint32(e.hdr[0:], kind)
	binary.LittleEndian.PutUint32(e.hdr[4:], aux)
	binary.LittleEndian.PutUint64(e.hdr[8:], uint64(n))
	if _, err := e.w.Write(e.hdr[:]); err != nil {
		return err
	}
	buf := slices.Grow(e.buf[:0], 4*min(len(v), indexPiece))
	for len(v) > 0 {
		k := min(len(v), indexPiece)
		buf = buf[:4*k]
		narrow(buf, v[:k])
		if _, err := e.w.Write(buf); err != nil {
			return err
		}
		v = v[k:]
	}
	e.buf = buf
	if pad := (8 - n%8) % 8; pad > 0 {
		_, err := e.w.Write(e.pad[:pad])
		return err
	}
	return nil
}

// writeEdgeAttribute writes link attribute k's values for the answer's
// edges as an edge attribute block: a validity bitmap, a bit an edge
// (least significant first; 1: the edge has a value), zero-padded to a
// multiple of 8 bytes, then a row an edge of the header's
// edge_attribute_info[k] (zero for an edge without a value). The rows go
// out from the column as they lie, a shared zero row for each edge
// without a value: the block is never built whole in memory.
func (e *binaryEncoder) writeEdgeAttribute(k int, c *zvf.EdgeColumn) error {
	if k >= len(e.m.EdgeAttributes) {
		return fmt.Errorf("edge attribute %q is not in the header's edge_attribute_info", c.Name)
	}
	if a := e.m.EdgeAttributes[k]; a.Name != c.Name || a.DType != c.DType || a.Channels != c.Channels {
		// The header went out before the cells were read: a level whose
		// chunks disagree on the channels cannot be described by it.
		return fmt.Errorf("edge attribute %q: %s × %d in the answer, %s × %d in the header", c.Name, c.DType, c.Channels, a.DType, a.Channels)
	}
	rb := c.RowBytes()
	n := c.Edges()
	bits := (bitmapBytes(n) + 7) &^ 7
	e.buf = grow(e.buf, bits)
	clear(e.buf)
	for i := range n {
		if c.Has(i) {
			e.buf[i>>3] |= 1 << (i & 7)
		}
	}
	binary.LittleEndian.PutUint32(e.hdr[0:], blockEdgeAttr)
	binary.LittleEndian.PutUint32(e.hdr[4:], uint32(k))
	binary.LittleEndian.PutUint64(e.hdr[8:], uint64(bits+n*rb))
	if _, err := e.w.Write(e.hdr[:]); err != nil {
		return err
	}
	if _, err := e.w.Write(e.buf); err != nil {
		return err
	}
	if c.Valid == nil {
		if _, err := e.w.Write(c.Data); err != nil {
			return err
		}
	} else {
		var zero []byte
		r := 0 // c.Data's rows written
		for i := 0; i < n; {
			// A run of edges with values is one write of their rows.
			j := i
			for j < n && c.Valid[j] {
				j++
			}
			if j > i {
				if _, err := e.w.Write(c.Data[r*rb : (r+j-i)*rb]); err != nil {
					return err
				}
				r += j - i
			}
			for ; j < n && !c.Valid[j]; j++ {
				if zero == nil {
					zero = make([]byte, rb)
				}
				if _, err := e.w.Write(zero); err != nil {
					return err
				}
			}
			i = j
		}
	}
	if pad := (8 - n*rb%8) % 8; pad > 0 {
		_, err := e.w.Write(e.pad[:pad])
		return err
	}
	return nil
}

// narrow writes v (checked to fit) into dst as little-endian uint32,
// two at a time: one 8-byte store a pair halves the stores of the
// answer's largest block after its vertices.
func narrow(dst []byte, v []int64) {
	dst = dst[:4*len(v)]
	i := 0
	for ; i+1 < len(v); i += 2 {
		binary.LittleEndian.PutUint64(dst[4*i:], uint64(uint32(v[i]))|uint64(uint32(v[i+1]))<<32)
	}
	if i < len(v) {
		binary.LittleEndian.PutUint32(dst[4*i:], uint32(v[i]))
	}
}

func (e *binaryEncoder) end(t *trailer) error {
	if t.WireEdges != nil {
		if err := e.writeBlock(blockEdges, 2, t.WireEdges); err != nil {
			return err
		}
	} else if t.Edges != nil {
		if err := e.writeIndices(blockEdges, 2, t.Edges); err != nil {
			return err
		}
	}
	for k := range t.EdgeAttributes {
		if err := e.writeEdgeAttribute(k, &t.EdgeAttributes[k]); err != nil {
			return err
		}
	}
	if t.Faces != nil {
		if err := e.writeIndices(blockFaces, uint32(t.FaceWidth), t.Faces); err != nil {
			return err
		}
	}
	dst := e.buf[:0]
	if cap(dst) < len(e.small) {
		dst = e.small[:0]
	}
	b, err := appendTrailer(dst, t)
	if err != nil {
		return err
	}
	e.buf = b
	return e.writeBlock(blockTrailer, 0, b)
}

// appendTrailer appends the trailer block's JSON: count, next (null on
// the last page) and any extra members, keys sorted as encoding/json
// sorts a map's. Without extra members, the common answer, it is
// written directly rather than through a map and reflection.
func appendTrailer(dst []byte, t *trailer) ([]byte, error) {
	if t.Page && len(t.Extra) == 0 && plainString(t.Next) {
		// A bbox page's: its members in encoding/json's key order.
		dst = strconv.AppendInt(append(dst, `{"count":`...), t.Count, 10)
		if t.Next == "" {
			dst = append(dst, `,"next":null`...)
		} else {
			dst = append(append(append(dst, `,"next":"`...), t.Next...), '"')
		}
		if t.MatchedKnown {
			dst = strconv.AppendInt(append(dst, `,"number_matched":`...), t.Matched, 10)
		}
		dst = strconv.AppendInt(append(dst, `,"offset":`...), t.Offset, 10)
		return append(dst, '}'), nil
	}
	extra := t.extra()
	if len(extra) == 0 {
		dst = strconv.AppendInt(append(dst, `{"count":`...), t.Count, 10)
		dst = append(dst, `,"next":`...)
		if t.Next == "" {
			return append(dst, "null}"...), nil
		}
		s, err := json.Marshal(t.Next)
		if err != nil {
			return nil, err
		}
		return append(append(dst, s...), '}'), nil
	}
	if b, ok := appendTrailerInts(dst, t, extra); ok {
		return b, nil
	}
	m := map[string]any{"count": t.Count, "next": nil}
	if t.Next != "" {
		m["next"] = t.Next
	}
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append(dst, b...), nil
}

// appendTrailerInts is appendTrailer for the common extra members —
// integers under plain names (offset, number_matched) — written in
// encoding/json's sorted key order without a map or reflection. ok is
// false, and dst untouched, for any other member. extra is t's extra
// members (trailer.extra).
func appendTrailerInts(dst []byte, t *trailer, extra map[string]any) ([]byte, bool) {
	var mem [8]string
	keys := append(mem[:0], "count", "next")
	if len(extra) > len(mem)-len(keys) {
		return dst, false
	}
	for k, v := range extra {
		switch v.(type) {
		case int64, int:
		default:
			return dst, false
		}
		if k == "count" || k == "next" || !plainKey(k) {
			return dst, false
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(append(append(dst, '"'), k...), `":`...)
		switch k {
		case "count":
			dst = strconv.AppendInt(dst, t.Count, 10)
		case "next":
			if t.Next == "" {
				dst = append(dst, "null"...)
				continue
			}
			if !plainString(t.Next) {
				return nil, false
			}
			dst = append(append(append(dst, '"'), t.Next...), '"')
		default:
			switch v := extra[k].(type) {
			case int64:
				dst = strconv.AppendInt(dst, v, 10)
			case int:
				dst = strconv.AppendInt(dst, int64(v), 10)
			}
		}
	}
	return append(dst, '}'), true
}

// plainKey reports whether encoding/json writes k as is between quotes.
func plainKey(k string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return k != ""
}

// plainString is plainKey for a cursor: URL-safe base64 and the like,
// nothing encoding/json would escape.
func plainString(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c == '_' || c == '-' || c == '.' || c == '=' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
