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
		n := c.At(row)
		code := n.I
		if n.Kind != zvf.KindInt {
			code = int64(min(n.U, 1<<62))
		}
		if (c.NullCode != nil && code == *c.NullCode) || code < 0 || code >= int64(len(c.Categories)) {
			return append(dst, "null"...)
		}
		return appendString(dst, c.Categories[code])
	}
	if c.Channels == 1 {
		return appendValue(dst, c, row)
	}
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
	dst = append(dst, '[')
	for k := 0; k < c.Channels; k++ {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = appendValue(dst, c, row*c.Channels+k)
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
	text  *batchers
	par   *batcher
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

func (e *jsonEncoder) batch(b *zvf.Batch) error { return e.par.batch(b, e.write) }

func (e *jsonEncoder) write(b *zvf.Batch) error {
	lead := e.n > 0 // a comma before the batch's first row
	err := e.par.rows.format(e.w, b.Rows, func(dst []byte, lo, hi int) []byte {
		for i := lo; i < hi; i++ {
			if lead || i > 0 {
				dst = append(dst, ',')
			}
			dst = appendRow(dst, &b.Vertices, i)
		}
		return dst
	})
	if err != nil {
		return err
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
	return nil
}

func (e *jsonEncoder) end(t *trailer) error {
	if err := e.par.flush(e.write); err != nil {
		return err
	}
	e.text.put(e.par)
	e.par = nil
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
