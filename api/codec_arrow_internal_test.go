package api

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/zvfserve/zvfserve/api/problem"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/demo"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
)

// flushedReader flushes bw and reads the Arrow stream it wrote into buf
// (released when t ends).
func flushedReader(t *testing.T, bw *bufio.Writer, buf *bytes.Buffer) *ipc.Reader {
	t.Helper()
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	rd, err := ipc.NewReader(buf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rd.Release)
	return rd
}

// roundTrip writes col (rows rows) as column c in two record batches —
// the first through arrow-go's IPC writer, the second through the
// writer's own RecordBatch messages — reads them back with arrow-go's
// reader, checks they are equal and returns the second.
func roundTrip(t *testing.T, c *arrowColumn, col *zvf.Column, rows int) arrow.Array {
	t.Helper()
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	aw, err := newArrowWriter(bw, []arrow.Field{{Name: c.name, Type: c.typ, Nullable: true}}, &payloadMeta{Kind: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		d, err := c.data(col, rows, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := aw.write([]*array.Data{d}, rows, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := aw.w.Close(); err != nil {
		t.Fatal(err)
	}
	rd := flushedReader(t, bw, &buf)
	var got []arrow.Array
	for rd.Next() {
		arr := rd.RecordBatch().Column(0)
		arr.Retain()
		t.Cleanup(arr.Release)
		got = append(got, arr)
	}
	if err := rd.Err(); err != nil || len(got) != 2 {
		t.Fatalf("%d batches: %v", len(got), err)
	}
	if !array.Equal(got[0], got[1]) {
		t.Fatalf("the IPC writer's batch %v, ours %v", got[0], got[1])
	}
	return got[1]
}

// TestArrowColumnTypes: the element types the reader can hand over, as
// Arrow types and values: bool as Arrow's bit-packed boolean, several
// channels as a FixedSizeList, float16 as half floats, positions as a
// list even of one axis; complex numbers, which Arrow has no type for,
// are a 406.
func TestArrowColumnTypes(t *testing.T) {
	c, err := newArrowColumn(zvf.AttrInfo{Name: "flag", DType: "bool", Channels: 1})
	if err != nil {
		t.Fatal(err)
	}
	b := roundTrip(t, c, &zvf.Column{Data: []byte{1, 0, 2, 0, 0, 0, 0, 0, 1}}, 9).(*array.Boolean)
	for i, want := range []bool{true, false, true, false, false, false, false, false, true} {
		if b.Value(i) != want {
			t.Fatalf("bool %d: %v", i, b.Value(i))
		}
	}

	c, err = newArrowColumn(zvf.AttrInfo{Name: "rgb", DType: "uint8", Channels: 3})
	if err != nil {
		t.Fatal(err)
	}
	l := roundTrip(t, c, &zvf.Column{Data: []byte{1, 2, 3, 4, 5, 6}}, 2).(*array.FixedSizeList)
	if l.DataType().(*arrow.FixedSizeListType).Len() != 3 || l.Len() != 2 || l.ListValues().(*array.Uint8).Value(5) != 6 {
		t.Fatalf("rgb: %v", l)
	}

	c, err = newArrowColumn(zvf.AttrInfo{Name: "half", DType: "float16", Channels: 1})
	if err != nil {
		t.Fatal(err)
	}
	h := roundTrip(t, c, &zvf.Column{Data: []byte{0x00, 0x3c, 0x00, 0xc0}}, 2).(*array.Float16) // 1, -2
	if h.Value(0).Float32() != 1 || h.Value(1).Float32() != -2 {
		t.Fatalf("float16: %v", h)
	}

	c, err = newArrowColumn(zvf.AttrInfo{Name: "position", DType: "float32", Channels: 1})
	if err != nil {
		t.Fatal(err)
	}
	c.asList()
	p := roundTrip(t, c, &zvf.Column{Data: []byte{0, 0, 0x80, 0x3f}}, 1).(*array.FixedSizeList)
	if p.DataType().(*arrow.FixedSizeListType).Len() != 1 || p.ListValues().(*array.Float32).Value(0) != 1 {
		t.Fatalf("one-axis position: %v", p)
	}

	if _, err := newArrowColumn(zvf.AttrInfo{Name: "z", DType: "complex64", Channels: 1}); !isKind(err, problem.NotAcceptable) {
		t.Fatalf("complex64: %v", err)
	}
	if _, err := newArrowColumn(zvf.AttrInfo{Name: "z", DType: "float32", Channels: 1, Categories: []string{"a"}}); !isKind(err, problem.NotAcceptable) {
		t.Fatalf("categorical float codes: %v", err)
	}
	c, err = newArrowColumn(zvf.AttrInfo{Name: "short", DType: "int32", Channels: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.data(&zvf.Column{Data: make([]byte, 12)}, 2, nil, 0); err == nil {
		t.Fatal("a column shorter than its rows was taken")
	}
}

func isKind(err error, k problem.Kind) bool {
	var p *Problem
	return errors.As(err, &p) && p.Kind() == k
}

// demoCells is the first store of the demo scene built with o: the cells,
// a point cloud with a categorical attribute.
func demoCells(t *testing.T, o demo.Options) *zvf.Store {
	t.Helper()
	ctx := context.Background()
	mem, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	infos, err := demo.Build(ctx, mem, o)
	if err != nil {
		t.Fatal(err)
	}
	st, err := zvf.Open(ctx, storage.Sub(mem, infos[0].Prefix), zvf.Options{Name: infos[0].Name})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestArrowCategoricalNulls: a code that is the dictionary's fill value,
// or outside its labels, is a null row (as JSON's null), the others the
// store's labels.
func TestArrowCategoricalNulls(t *testing.T) {
	ctx := context.Background()
	st := demoCells(t, demo.Options{Seed: 5, Scale: 0.05})
	l, err := st.Level(0)
	if err != nil {
		t.Fatal(err)
	}
	tile, err := l.Chunk(ctx, l.Keys()[0], []string{"cell_type"})
	if err != nil {
		t.Fatal(err)
	}
	col := tile.Attributes[0]
	if col.Categories == nil || tile.Rows < 3 {
		t.Fatalf("cell_type: %d rows, labels %v", tile.Rows, col.Categories)
	}
	col.Data = bytes.Clone(col.Data)
	size := len(col.Data) / tile.Rows
	// Row 0: the fill value; row 1: past the labels; row 2: label 1.
	null := int64(len(col.Categories) - 1)
	col.NullCode = &null
	col.Data[0] = byte(null)
	col.Data[size] = byte(len(col.Categories))
	col.Data[2*size] = 1
	for k := 1; k < size; k++ {
		col.Data[k], col.Data[size+k], col.Data[2*size+k] = 0, 0, 0
	}
	c, err := newArrowColumn(zvf.AttrInfo{Name: "cell_type", DType: col.DType, Channels: 1, Categories: col.Categories})
	if err != nil {
		t.Fatal(err)
	}
	defer c.release()
	d := roundTrip(t, c, &col, tile.Rows).(*array.Dictionary)
	if !d.IsNull(0) || !d.IsNull(1) || d.IsNull(2) || d.Dictionary().(*array.String).Value(d.GetValueIndex(2)) != col.Categories[1] {
		t.Fatalf("rows 0–2: null %v %v %v, label %q", d.IsNull(0), d.IsNull(1), d.IsNull(2), d.Dictionary().(*array.String).Value(d.GetValueIndex(2)))
	}
	// The same codes as two channels of half the rows: a FixedSizeList
	// of dictionary entries.
	col.Channels = 2
	c2, err := newArrowColumn(zvf.AttrInfo{Name: "pair", DType: col.DType, Channels: 2, Categories: col.Categories})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.release()
	rows := tile.Rows / 2
	col.Data = col.Data[:2*rows*size]
	pairs := roundTrip(t, c2, &col, rows).(*array.FixedSizeList)
	v := pairs.ListValues().(*array.Dictionary)
	if pairs.Len() != rows || !v.IsNull(0) || !v.IsNull(1) || v.Dictionary().(*array.String).Value(v.GetValueIndex(2)) != col.Categories[1] {
		t.Fatalf("two channels: %v", pairs)
	}
}
