package api

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/zvfserve/zvfserve/zvf"
)

// TestArrowEdgeValuesAcrossBatches: an edges table longer than one record
// batch (maxIndexBatch rows) carries each edge's value in the batch of its
// indices, two channels a row, nulls where it has none, at their places
// past the first batch too (the validity bitmap and values cut at the
// batch's first edge).
func TestArrowEdgeValuesAcrossBatches(t *testing.T) {
	t.Parallel()
	n := maxIndexBatch + 1000
	edges := make([]int64, 2*n)
	data := make([]byte, 0, 8*n)
	valid := make([]bool, n)
	for i := range n {
		edges[2*i], edges[2*i+1] = int64(i), int64(i+1)
		valid[i] = i%7 != 3
		if valid[i] { // the column holds the rows of edges with a value only
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(i)))
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(-float32(i)))
		}
	}
	col, err := zvf.NewColumn("w", "float32", 2, data)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := zvf.NewEdgeColumn(col, valid)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	e := &arrowEncoder{}
	if err := e.begin(bw, &payloadMeta{Kind: "bbox", Arrow: &arrowMeta{table: tableEdges}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.end(&trailer{Count: int64(n + 1), Edges: edges, EdgeAttributes: []zvf.EdgeColumn{ec}}); err != nil {
		t.Fatal(err)
	}
	rd := flushedReader(t, bw, &buf)
	if f := rd.Schema().Fields(); len(f) != 3 || f[2].Name != "w" || !f[2].Nullable {
		t.Fatalf("fields %v", f)
	}
	at, batches := 0, 0
	for rd.Next() {
		rec := rd.RecordBatch()
		batches++
		v0 := rec.Column(0).(*array.Uint32)
		w := rec.Column(2).(*array.FixedSizeList)
		vals := w.ListValues().(*array.Float32)
		for i := 0; i < int(rec.NumRows()); i++ {
			e := at + i
			if int(v0.Value(i)) != e {
				t.Fatalf("row %d of batch %d: v0 %d, want %d", i, batches, v0.Value(i), e)
			}
			if w.IsValid(i) != valid[e] {
				t.Fatalf("edge %d: valid %v, want %v", e, w.IsValid(i), valid[e])
			}
			if valid[e] && (vals.Value(2*i) != float32(e) || vals.Value(2*i+1) != -float32(e)) {
				t.Fatalf("edge %d: %v %v", e, vals.Value(2*i), vals.Value(2*i+1))
			}
		}
		at += int(rec.NumRows())
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	if at != n || batches < 3 {
		t.Fatalf("%d rows in %d batches, want %d in at least 3 (two and the closing one)", at, batches, n)
	}
}
