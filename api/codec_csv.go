package api

import (
	"bufio"
	"strconv"
	"strings"

	"github.com/zvfserve/zvfserve/zvf"
)

// csvCodec writes points as CSV (RFC 4180, LF line ends): a header of the
// axis names, object_id when the level has object ids, then the
// attributes (a multi-channel one as name_0, name_1, …); a row per
// vertex in answer order. Numbers are the shortest text that reads back
// to the stored value; NaN is an empty field, infinities inf and -inf; a
// categorical attribute is its label (empty for the null code). Rows
// stream as batches come; nothing is held.
var csvCodec = exportCodec{name: "csv", mime: "text/csv", compress: true, geoms: []string{"point_cloud"}, pageGeoms: []string{"point_cloud"},
	encoder: func() encoder { return &csvEncoder{} }}

type csvEncoder struct {
	w   *bufio.Writer
	m   *payloadMeta
	buf []byte
}

func (e *csvEncoder) begin(w *bufio.Writer, m *payloadMeta, _ *answerMem) error {
	e.w, e.m = w, m
	var names []string
	names = append(names, axisNames(m.Export.axes, m.Dims)...)
	if m.ObjectIDs {
		names = append(names, "object_id")
	}
	for _, a := range m.Attributes {
		names = append(names, channelNames(a.Name, a.Channels)...)
	}
	if err := uniqueNames("csv", names); err != nil {
		return err
	}
	e.buf = e.buf[:0]
	for i, n := range names {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = appendCSVField(e.buf, n)
	}
	e.buf = append(e.buf, '\n')
	_, err := w.Write(e.buf)
	return err
}

func (e *csvEncoder) batch(b *zvf.Batch) error {
	for i := 0; i < b.Rows; i++ {
		e.buf = e.buf[:0]
		for k := 0; k < b.Vertices.Channels; k++ {
			if k > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = appendCSVNumber(e.buf, &b.Vertices, i*b.Vertices.Channels+k)
		}
		if e.m.ObjectIDs {
			e.buf = append(e.buf, ',')
			if i < len(b.ObjectIDs) {
				e.buf = strconv.AppendInt(e.buf, b.ObjectIDs[i], 10)
			}
		}
		for a := range b.Attributes {
			c := &b.Attributes[a]
			for k := 0; k < max(c.Channels, 1); k++ {
				e.buf = append(e.buf, ',')
				if c.Categories != nil {
					if label, ok := categoryLabel(c, i*c.Channels+k); ok {
						e.buf = appendCSVField(e.buf, label)
					}
					continue
				}
				e.buf = appendCSVNumber(e.buf, c, i*c.Channels+k)
			}
		}
		e.buf = append(e.buf, '\n')
		if _, err := e.w.Write(e.buf); err != nil {
			return err
		}
	}
	return nil
}

func (e *csvEncoder) end(*trailer) error { return nil }

// appendCSVNumber is appendNumber with NaN as an empty field.
func appendCSVNumber(dst []byte, c *zvf.Column, i int) []byte {
	if c.DType == "bool" {
		return strconv.AppendBool(dst, c.At(i).U != 0)
	}
	n := len(dst)
	dst = appendNumber(dst, c, i)
	if string(dst[n:]) == "nan" {
		return dst[:n]
	}
	return dst
}

// appendCSVField quotes a field that needs it (RFC 4180).
func appendCSVField(dst []byte, s string) []byte {
	if !strings.ContainsAny(s, ",\"\r\n") && strings.TrimSpace(s) == s {
		return append(dst, s...)
	}
	dst = append(dst, '"')
	dst = append(dst, strings.ReplaceAll(s, `"`, `""`)...)
	return append(dst, '"')
}

// categoryLabel is the label of a categorical cell; ok is false for the
// null code and codes outside the categories.
func categoryLabel(c *zvf.Column, i int) (string, bool) {
	n := c.At(i)
	code := n.I
	if n.Kind != zvf.KindInt {
		code = int64(min(n.U, 1<<62))
	}
	if (c.NullCode != nil && code == *c.NullCode) || code < 0 || code >= int64(len(c.Categories)) {
		return "", false
	}
	return c.Categories[code], true
}
