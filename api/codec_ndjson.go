package api

import (
	"bufio"
	"encoding/json"
	"strconv"

	"github.com/zvfserve/zvfserve/zvf"
)

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
