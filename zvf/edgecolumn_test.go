package zvf_test

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
)

// TestEdgeColumnRows: an edge column holds the rows of the edges with a
// value only; Row, At and StoredRow find edge i's across the 64-edge
// steps its ranks are kept at, whatever the pattern of edges without one,
// and a column whose bytes are not a row per valued edge is refused.
func TestEdgeColumnRows(t *testing.T) {
	t.Parallel()
	const n, ch = 300, 2
	for _, tc := range []struct {
		name string
		has  func(i int) bool
	}{
		{"all", nil},
		{"none", func(int) bool { return false }},
		{"every third", func(i int) bool { return i%3 == 0 }},
		{"a run from 63", func(i int) bool { return i >= 63 && i < 200 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var valid []bool
			var data []byte
			for i := range n {
				if tc.has != nil {
					valid = append(valid, tc.has(i))
					if !valid[i] {
						continue
					}
				}
				data = binary.LittleEndian.AppendUint32(data, uint32(i))
				data = binary.LittleEndian.AppendUint32(data, uint32(i+1000))
			}
			col, err := zvf.NewColumn("w", "uint32", ch, data)
			if err != nil {
				t.Fatal(err)
			}
			c, err := zvf.NewEdgeColumn(col, valid)
			if err != nil {
				t.Fatal(err)
			}
			if c.Edges() != n {
				t.Fatalf("%d edges, want %d", c.Edges(), n)
			}
			stored := 0
			for i := range n {
				has := tc.has == nil || tc.has(i)
				row := c.Row(i)
				switch {
				case c.Has(i) != has:
					t.Fatalf("edge %d: has %v, want %v", i, c.Has(i), has)
				case !has && (row != nil || c.StoredRow(i) != -1 || c.At(i*ch+1).U != 0):
					t.Fatalf("edge %d without a value: row %v, stored row %d, %v", i, row, c.StoredRow(i), c.At(i*ch+1))
				case has && (c.StoredRow(i) != stored || binary.LittleEndian.Uint32(row) != uint32(i) || c.At(i*ch+1).U != uint64(i+1000)):
					t.Fatalf("edge %d: stored row %d (want %d), row %v, %v", i, c.StoredRow(i), stored, row, c.At(i*ch+1))
				}
				if has {
					stored++
				}
			}
			if len(c.Data) != stored*c.RowBytes() {
				t.Fatalf("%d bytes for %d values", len(c.Data), stored)
			}
		})
	}
	// A row for every edge, yet one edge without a value: refused.
	col, err := zvf.NewColumn("w", "uint32", 1, make([]byte, 4*3))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zvf.NewEdgeColumn(col, []bool{true, false, true}); err == nil || !strings.Contains(err.Error(), `edge attribute "w": 12 bytes for 2 rows of 1 × uint32`) {
		t.Fatalf("got %v", err)
	}
}
