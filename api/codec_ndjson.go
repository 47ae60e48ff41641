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
	w    *bufio.Writer
	m    *payloadMeta
	mem  *answerMem
	text *batchers
	par  *batcher
	// cells: the batch's attributes' prepared text; names and ends: the
	// members' starts of the attributes of (see memberStarts).
	cells []*rowText
	names []byte
	ends  []int
	of    []string
}

func (e *ndjsonEncoder) begin(w *bufio.Writer, m *payloadMeta, mem *answerMem) error {
	e.w, e.m, e.mem = w, m, mem
	// The most text a line takes: {"v":[…],"id":…,"a":{"name":…,…}}
	width := len(`{"v":`) + vertexWidth(m) + len("}\n")
	if m.ObjectIDs {
		width += len(`,"id":`) + 20
	}
	if len(m.Attributes) > 0 {
		width += len(`,"a":{}`)
		for _, a := range m.Attributes {
			width += 2*len(a.Name) + len(`"":`) + textWidth(a) // a name's escapes, at most doubling it
		}
	}
	e.par.width = width
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func (e *ndjsonEncoder) batch(b *zvf.Batch) error {
	// A line's vertex and attribute values are copied from the chunk's
	// prepared text when it has text for all of them.
	if t := preparedText(b); t != nil {
		cells := e.cells[:0]
		for k := range b.Attributes {
			c := preparedCells(b, k)
			if c == nil {
				break
			}
			cells = append(cells, c)
		}
		e.cells = cells
		if len(cells) == len(b.Attributes) {
			if err := e.par.flush(e.write); err != nil {
				return err
			}
			err := e.writeText(t, cells, b)
			clear(cells)
			e.mem.hold(e.par.size())
			return err
		}
		clear(cells)
	}
	err := e.par.batch(b, e.write)
	e.mem.hold(e.par.size())
	return err
}

func (e *ndjsonEncoder) write(b *zvf.Batch) error {
	names, ends := e.memberStarts(b)
	return e.par.rows.format(e.w, b.Rows, e.par.width, func(buf []byte, lo, hi int) []byte {
		for i := lo; i < hi; i++ {
			buf = append(buf, `{"v":`...)
			buf = appendRow(buf, &b.Vertices, i)
			if e.m.ObjectIDs && i < len(b.ObjectIDs) {
				buf = append(buf, `,"id":`...)
				buf = strconv.AppendInt(buf, b.ObjectIDs[i], 10)
			}
			if len(b.Attributes) > 0 {
				buf = append(buf, `,"a":{`...)
				at := 0
				for k := range b.Attributes {
					buf = append(buf, names[at:ends[k]]...)
					buf = appendCell(buf, &b.Attributes[k], i)
					at = ends[k]
				}
				buf = append(buf, '}')
			}
			buf = append(buf, "}\n"...)
		}
		return buf
	})
}

// memberStarts returns each of b's attributes' member start in a line's
// "a" object (`,"name":`, no comma for the first), quoted once a batch
// rather than once a row (and kept while batches name the same
// attributes): attribute k's is names[ends[k-1]:ends[k]].
func (e *ndjsonEncoder) memberStarts(b *zvf.Batch) (names []byte, ends []int) {
	if len(e.of) == len(b.Attributes) {
		same := true
		for k := range b.Attributes {
			same = same && e.of[k] == b.Attributes[k].Name
		}
		if same {
			return e.names, e.ends
		}
	}
	e.of = e.of[:0]
	for k := range b.Attributes {
		e.of = append(e.of, b.Attributes[k].Name)
	}
	names, ends = e.names[:0], e.ends[:0]
	for k := range b.Attributes {
		if k > 0 {
			names = append(names, ',')
		}
		names = appendString(names, b.Attributes[k].Name)
		names = append(names, ':')
		ends = append(ends, len(names))
	}
	e.names, e.ends = names, ends
	return names, ends
}

// writeText writes b's lines with each vertex's text taken from t and
// attribute k's from cells[k].
func (e *ndjsonEncoder) writeText(t *rowText, cells []*rowText, b *zvf.Batch) error {
	buf, sel := e.par.lines[:0], sourceRows(b.Source)
	names, ends := e.memberStarts(b)
	for i := range b.Rows {
		buf = append(buf, `{"v":`...)
		buf = append(buf, t.row(sel, i)...)
		if e.m.ObjectIDs && i < len(b.ObjectIDs) {
			buf = append(buf, `,"id":`...)
			buf = strconv.AppendInt(buf, b.ObjectIDs[i], 10)
		}
		if len(cells) > 0 {
			buf = append(buf, `,"a":{`...)
			at := 0
			for k, c := range cells {
				buf = append(buf, names[at:ends[k]]...)
				buf = append(buf, c.row(sel, i)...)
				at = ends[k]
			}
			buf = append(buf, '}')
		}
		buf = append(buf, "}\n"...)
		if len(buf) >= 32<<10 {
			if _, err := e.w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	e.par.lines = buf[:0]
	_, err := e.w.Write(buf)
	return err
}

func (e *ndjsonEncoder) end(t *trailer) error {
	if err := e.par.flush(e.write); err != nil {
		return err
	}
	e.text.put(e.par)
	e.par = nil
	e.mem.hold(0)
	m := map[string]any{"count": t.Count, "next": nil}
	if t.Next != "" {
		m["next"] = t.Next
	}
	if t.Edges != nil {
		m["edges"] = pairs(t.Edges, 2)
	}
	if t.EdgeAttributes != nil {
		m["edge_attributes"] = json.RawMessage(appendEdgeAttributes(nil, t.EdgeAttributes, nil))
	}
	if t.Faces != nil {
		m["faces"] = pairs(t.Faces, t.FaceWidth)
	}
	for k, v := range t.extra() {
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
