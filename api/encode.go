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

// Media types of the vertex payload formats.
const (
	mediaJSON   = "application/json"
	mediaNDJSON = "application/x-ndjson"
	mediaBinary = "application/vnd.zvf.v1+octet-stream"
)

// payloadMeta opens a vertex payload (bbox, object or chunk answer).
type payloadMeta struct {
	Kind        string         `json:"kind"`
	Store       string         `json:"store"`
	Level       int            `json:"level"`
	Dims        int            `json:"dims"`
	VertexDType string         `json:"vertex_dtype"`
	Attributes  []zvf.AttrInfo `json:"attribute_info"`
	ObjectIDs   bool           `json:"has_object_ids"`
}

// trailer closes it: counts, paging and connectivity, plus kind-specific
// fields (Extra) such as an object's id or a chunk's fragments.
type trailer struct {
	Count     int64
	Next      string
	Edges     []int64
	Faces     []int64
	FaceWidth int
	Extra     map[string]any
}

// encoder is one output format. Begin, then Batch for every batch in
// order, then End; the encoder streams to w as it goes.
type encoder interface {
	begin(w *bufio.Writer, m *payloadMeta) error
	batch(b *zvf.Batch) error
	end(t *trailer) error
}

func newEncoder(format string) encoder {
	switch format {
	case "ndjson":
		return &ndjsonEncoder{}
	case "bin":
		return &binaryEncoder{}
	}
	return &jsonEncoder{}
}

// appendValue appends element i of a little-endian column as JSON.
func appendValue(dst []byte, dtype string, data []byte, i int) []byte {
	switch dtype {
	case "float32":
		return appendFloat(dst, float64(math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))), 32)
	case "float64":
		return appendFloat(dst, math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:])), 64)
	case "int8":
		return strconv.AppendInt(dst, int64(int8(data[i])), 10)
	case "uint8":
		return strconv.AppendUint(dst, uint64(data[i]), 10)
	case "bool":
		if data[i] != 0 {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case "int16":
		return strconv.AppendInt(dst, int64(int16(binary.LittleEndian.Uint16(data[2*i:]))), 10)
	case "uint16":
		return strconv.AppendUint(dst, uint64(binary.LittleEndian.Uint16(data[2*i:])), 10)
	case "int32":
		return strconv.AppendInt(dst, int64(int32(binary.LittleEndian.Uint32(data[4*i:]))), 10)
	case "uint32":
		return strconv.AppendUint(dst, uint64(binary.LittleEndian.Uint32(data[4*i:])), 10)
	case "int64":
		return strconv.AppendInt(dst, int64(binary.LittleEndian.Uint64(data[8*i:])), 10)
	case "uint64":
		return strconv.AppendUint(dst, binary.LittleEndian.Uint64(data[8*i:]), 10)
	case "float16":
		h := binary.LittleEndian.Uint16(data[2*i:])
		return appendFloat(dst, halfToFloat(h), 32)
	}
	return append(dst, "null"...)
}

func halfToFloat(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	mant := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(mant, -24)
	case 0x1f:
		if mant != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * math.Ldexp(1+mant/1024, exp-15)
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
		code := int64(0)
		switch c.DType {
		case "uint8":
			code = int64(c.Data[row])
		case "int8":
			code = int64(int8(c.Data[row]))
		case "uint16":
			code = int64(binary.LittleEndian.Uint16(c.Data[2*row:]))
		case "int16":
			code = int64(int16(binary.LittleEndian.Uint16(c.Data[2*row:])))
		case "uint32":
			code = int64(binary.LittleEndian.Uint32(c.Data[4*row:]))
		case "int32":
			code = int64(int32(binary.LittleEndian.Uint32(c.Data[4*row:])))
		default:
			code = -1
		}
		if (c.NullCode != nil && code == *c.NullCode) || code < 0 || code >= int64(len(c.Categories)) {
			return append(dst, "null"...)
		}
		return appendString(dst, c.Categories[code])
	}
	if c.Channels == 1 {
		return appendValue(dst, c.DType, c.Data, row)
	}
	dst = append(dst, '[')
	for k := 0; k < c.Channels; k++ {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = appendValue(dst, c.DType, c.Data, row*c.Channels+k)
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
	dst = append(dst, '[')
	for k := 0; k < c.Channels; k++ {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = appendValue(dst, c.DType, c.Data, row*c.Channels+k)
	}
	return append(dst, ']')
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
// object ids and attribute values are held in side buffers (bounded by the
// response's vertex limit) because they are separate members.
type jsonEncoder struct {
	w     *bufio.Writer
	m     *payloadMeta
	n     int64
	buf   []byte
	ids   []byte
	attrs [][]byte
}

func (e *jsonEncoder) begin(w *bufio.Writer, m *payloadMeta) error {
	e.w, e.m = w, m
	e.attrs = make([][]byte, len(m.Attributes))
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	// Reuse the meta object's members, then open the vertex list.
	_, err = w.Write(append(b[:len(b)-1], `,"vertices":[`...))
	return err
}

func (e *jsonEncoder) batch(b *zvf.Batch) error {
	buf := e.buf[:0]
	for i := 0; i < b.Rows; i++ {
		if e.n > 0 || i > 0 {
			buf = append(buf, ',')
		}
		buf = appendRow(buf, &b.Vertices, i)
		if len(buf) > 32<<10 {
			if _, err := e.w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	if e.m.ObjectIDs {
		for i, id := range b.ObjectIDs {
			if e.n > 0 || i > 0 {
				e.ids = append(e.ids, ',')
			}
			e.ids = strconv.AppendInt(e.ids, id, 10)
		}
	}
	for k := range b.Attributes {
		if k >= len(e.attrs) {
			break
		}
		c := &b.Attributes[k]
		for i := 0; i < b.Rows; i++ {
			if e.n > 0 || i > 0 {
				e.attrs[k] = append(e.attrs[k], ',')
			}
			e.attrs[k] = appendCell(e.attrs[k], c, i)
		}
	}
	e.n += int64(b.Rows)
	e.buf = buf
	_, err := e.w.Write(buf)
	return err
}

func (e *jsonEncoder) end(t *trailer) error {
	buf := e.buf[:0]
	buf = append(buf, ']')
	if e.m.ObjectIDs {
		buf = append(buf, `,"object_ids":[`...)
		buf = append(buf, e.ids...)
		buf = append(buf, ']')
	}
	buf = append(buf, `,"attributes":{`...)
	for k, a := range e.m.Attributes {
		if k > 0 {
			buf = append(buf, ',')
		}
		buf = appendString(buf, a.Name)
		buf = append(buf, ":["...)
		buf = append(buf, e.attrs[k]...)
		buf = append(buf, ']')
	}
	buf = append(buf, '}')
	if t.Edges != nil {
		buf = append(buf, `,"edges":`...)
		buf = appendPairs(buf, t.Edges, 2)
	}
	if t.Faces != nil {
		buf = append(buf, `,"faces":`...)
		buf = appendPairs(buf, t.Faces, t.FaceWidth)
	}
	// Sorted, so equal requests give equal bytes (strong ETags).
	keys := make([]string, 0, len(t.Extra))
	for k := range t.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b, err := json.Marshal(t.Extra[k])
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

func appendPairs(buf []byte, v []int64, w int) []byte {
	buf = append(buf, '[')
	for i := 0; i+w <= len(v); i += w {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendInts(buf, v[i:i+w])
	}
	return append(buf, ']')
}

// ---- NDJSON ----

// ndjsonEncoder writes the meta object, then one line per vertex
// {"v":[…],"id":…,"a":{…}}, then a closing line with count, next and
// connectivity.
type ndjsonEncoder struct {
	w   *bufio.Writer
	m   *payloadMeta
	buf []byte
}

func (e *ndjsonEncoder) begin(w *bufio.Writer, m *payloadMeta) error {
	e.w, e.m = w, m
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func (e *ndjsonEncoder) batch(b *zvf.Batch) error {
	buf := e.buf[:0]
	for i := 0; i < b.Rows; i++ {
		buf = append(buf, `{"v":`...)
		buf = appendRow(buf, &b.Vertices, i)
		if e.m.ObjectIDs && i < len(b.ObjectIDs) {
			buf = append(buf, `,"id":`...)
			buf = strconv.AppendInt(buf, b.ObjectIDs[i], 10)
		}
		if len(b.Attributes) > 0 {
			buf = append(buf, `,"a":{`...)
			for k := range b.Attributes {
				if k > 0 {
					buf = append(buf, ',')
				}
				buf = appendString(buf, b.Attributes[k].Name)
				buf = append(buf, ':')
				buf = appendCell(buf, &b.Attributes[k], i)
			}
			buf = append(buf, '}')
		}
		buf = append(buf, "}\n"...)
		if len(buf) > 32<<10 {
			if _, err := e.w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	e.buf = buf
	_, err := e.w.Write(buf)
	return err
}

func (e *ndjsonEncoder) end(t *trailer) error {
	m := map[string]any{"count": t.Count, "next": nil}
	if t.Next != "" {
		m["next"] = t.Next
	}
	if t.Edges != nil {
		m["edges"] = pairs(t.Edges, 2)
	}
	if t.Faces != nil {
		m["faces"] = pairs(t.Faces, t.FaceWidth)
	}
	for k, v := range t.Extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = e.w.Write(append(b, '\n'))
	return err
}

func pairs(v []int64, w int) [][]int64 {
	out := make([][]int64, 0, len(v)/max(w, 1))
	for i := 0; i+w <= len(v); i += w {
		out = append(out, v[i:i+w])
	}
	return out
}

// ---- binary ----

// Block kinds of the binary format (docs/binary-format.md).
const (
	blockVertices  = 1
	blockObjectIDs = 2
	blockAttribute = 3
	blockEdges     = 4
	blockFaces     = 5
	blockTrailer   = 15
)

var binaryMagic = [8]byte{'Z', 'V', 'F', 'B', 'I', 'N', 0, 1}

type binaryEncoder struct {
	w   *bufio.Writer
	m   *payloadMeta
	hdr [16]byte
	buf []byte // little-endian scratch for the id (uint64), edge and face (uint32) blocks
}

var zeros [8]byte

func (e *binaryEncoder) writeBlock(kind, aux uint32, payload []byte) error {
	binary.LittleEndian.PutUint32(e.hdr[0:], kind)
	binary.LittleEndian.PutUint32(e.hdr[4:], aux)
	binary.LittleEndian.PutUint64(e.hdr[8:], uint64(len(payload)))
	if _, err := e.w.Write(e.hdr[:]); err != nil {
		return err
	}
	if _, err := e.w.Write(payload); err != nil {
		return err
	}
	if pad := (8 - len(payload)%8) % 8; pad > 0 {
		_, err := e.w.Write(zeros[:pad])
		return err
	}
	return nil
}

func (e *binaryEncoder) begin(w *bufio.Writer, m *payloadMeta) error {
	e.w, e.m = w, m
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if _, err := w.Write(binaryMagic[:]); err != nil {
		return err
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	_, err = w.Write(zeros[:(8-len(b)%8)%8])
	return err
}

func (e *binaryEncoder) batch(b *zvf.Batch) error {
	if err := e.writeBlock(blockVertices, uint32(b.Rows), b.Vertices.Data); err != nil {
		return err
	}
	if e.m.ObjectIDs && b.ObjectIDs != nil {
		e.buf = e.buf[:0]
		for _, id := range b.ObjectIDs {
			e.buf = binary.LittleEndian.AppendUint64(e.buf, uint64(id))
		}
		if err := e.writeBlock(blockObjectIDs, uint32(b.Rows), e.buf); err != nil {
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

func (e *binaryEncoder) end(t *trailer) error {
	if t.Edges != nil {
		e.buf = e.buf[:0]
		for _, v := range t.Edges {
			e.buf = binary.LittleEndian.AppendUint32(e.buf, uint32(v))
		}
		if err := e.writeBlock(blockEdges, 2, e.buf); err != nil {
			return err
		}
	}
	if t.Faces != nil {
		e.buf = e.buf[:0]
		for _, v := range t.Faces {
			e.buf = binary.LittleEndian.AppendUint32(e.buf, uint32(v))
		}
		if err := e.writeBlock(blockFaces, uint32(t.FaceWidth), e.buf); err != nil {
			return err
		}
	}
	m := map[string]any{"count": t.Count, "next": nil}
	if t.Next != "" {
		m["next"] = t.Next
	}
	for k, v := range t.Extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return e.writeBlock(blockTrailer, 0, b)
}
