package api

import (
	"bufio"
	"context"
	"math"

	"github.com/zvfserve/zvfserve/zvf"
)

// A warm server answers the same cached chunks again and again, and a
// JSON vertex row costs about 50 ns a coordinate to format but a few to
// copy. rowText is a chunk's vertex rows as the JSON and NDJSON encoders
// write them (appendRow), made once per cached chunk and kept in the
// store's cache beside it (zvf.ChunkRows.Prepared, charged to its byte
// budget): row i is text[off[i] : off[i+1]-1], each row followed by a
// comma, so that a run of consecutive rows is one copy.
type rowText struct {
	text []byte
	off  []uint32 // rows+1 offsets into text
}

// rowTextName names rowText among a chunk's prepared values; a change to
// what appendRow writes must change it.
const rowTextName = "json-rows/1"

// cellTextName names the text of an attribute column's rows (appendCell).
const cellTextName = "json-cells/2"

// buildRowText formats every row of a chunk's vertices; nil (and no
// size) when its text would not fit 32-bit offsets.
func buildRowText(c zvf.Column) (any, int64) { return buildText(c, appendRow) }

// buildCellText formats every row of a chunk's attribute column as the
// JSON encoder's attribute members do.
func buildCellText(c zvf.Column) (any, int64) { return buildText(c, appendCell) }

func buildText(c zvf.Column, appendOne func(dst []byte, c *zvf.Column, row int) []byte) (any, int64) {
	rb := c.RowBytes()
	if rb <= 0 {
		return (*rowText)(nil), 0
	}
	n := len(c.Data) / rb
	off := make([]uint32, n+1)
	text := make([]byte, 0, n*(vertexTextWidth(c.Channels)+1))
	for i := range n {
		if len(text) > math.MaxUint32-1024 {
			return (*rowText)(nil), 0
		}
		off[i] = uint32(len(text))
		text = appendOne(text, &c, i)
		text = append(text, ',')
	}
	off[n] = uint32(len(text))
	// Kept for as long as the chunk is warm: no spare capacity.
	t := &rowText{text: make([]byte, len(text)), off: off}
	copy(t.text, text)
	return t, t.size()
}

// size is the memory t holds, in bytes.
func (t *rowText) size() int64 { return 64 + int64(cap(t.text)) + 4*int64(cap(t.off)) }

// vertexTextWidth is a guess at a float32 row's text (a typical
// coordinate is 8 to 10 characters), to size the build's buffer.
func vertexTextWidth(dims int) int { return 2 + 10*max(dims, 1) }

// preparedText returns the text of b's chunk when b comes from a cached
// chunk whose text the cache keeps (built now if it is not there yet),
// else nil: the encoder then formats b's rows itself.
func preparedText(b *zvf.Batch) *rowText {
	if b.Source == nil {
		return nil
	}
	// The build does no I/O and always ends, so waiting for another
	// answer's build of the same chunk cannot hang.
	v, ok := b.Source.Prepared(context.Background(), rowTextName, buildRowText)
	return checkedText(b, v, ok)
}

// preparedCells is preparedText for b's attribute k.
func preparedCells(b *zvf.Batch, k int) *rowText {
	if b.Source == nil {
		return nil
	}
	v, ok := b.Source.PreparedAttribute(context.Background(), k, cellTextName, buildCellText)
	return checkedText(b, v, ok)
}

// checkedText is v as b's rows' text, nil when it is none or does not
// hold b's rows.
func checkedText(b *zvf.Batch, v any, ok bool) *rowText {
	if !ok {
		return nil
	}
	t, _ := v.(*rowText)
	if t == nil {
		return nil
	}
	s := b.Source
	n := len(t.off) - 1
	if lo, hi, all := s.Span(); all {
		if lo < 0 || hi > n || hi-lo != b.Rows {
			return nil
		}
	} else if rows := s.Rows(); len(rows) != b.Rows || (len(rows) > 0 && (rows[0] < 0 || int(rows[len(rows)-1]) >= n)) {
		return nil
	}
	return t
}

// textRows are the chunk rows a batch holds: [lo, hi) when all, else
// rows (ascending).
type textRows struct {
	all    bool
	lo, hi int
	rows   []int32
}

func sourceRows(s *zvf.ChunkRows) textRows {
	lo, hi, all := s.Span()
	if all {
		return textRows{all: true, lo: lo, hi: hi}
	}
	return textRows{rows: s.Rows()}
}

// writeJSON writes the rows of sel as JSON array elements, a comma before
// each but the answer's first (lead: rows were written before these).
func (t *rowText) writeJSON(w *bufio.Writer, sel textRows, lead bool) error {
	if sel.all {
		if sel.lo == sel.hi {
			return nil
		}
		if lead {
			_ = w.WriteByte(',')
		}
		_, err := w.Write(t.text[t.off[sel.lo] : t.off[sel.hi]-1])
		return err
	}
	rows := sel.rows
	for j := 0; j < len(rows); {
		// A run of consecutive rows is one copy.
		r, k := int(rows[j]), j+1
		for k < len(rows) && int(rows[k]) == r+k-j {
			k++
		}
		if lead || j > 0 {
			_ = w.WriteByte(',')
		}
		if _, err := w.Write(t.text[t.off[r] : t.off[r+k-j]-1]); err != nil {
			return err
		}
		j = k
	}
	return nil
}

// row returns the text of the i-th row of sel.
func (t *rowText) row(sel textRows, i int) []byte {
	r := sel.lo + i
	if !sel.all {
		r = int(sel.rows[i])
	}
	return t.text[t.off[r] : t.off[r+1]-1]
}
