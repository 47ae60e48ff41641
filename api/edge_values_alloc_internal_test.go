package api

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
)

// TestBinaryEdgeValuesStreamed: f=bin's edge attribute block of 100,000
// edges of a 16-channel float32 attribute, 1% of them with a value, is the
// bitmap then a row an edge (zeros for one without a value), written from
// the column as it lies. Before, the column held a zero row for every edge
// without a value (6.4 MB here) and the encoder copied it once more into
// the block's payload; now writing it allocates little beyond the bitmap.
func TestBinaryEdgeValuesStreamed(t *testing.T) {
	const n, ch = 100000, 16
	valid := make([]bool, n)
	var data []byte
	want := make([]byte, (n+63)/64*8+4*ch*n) // the block's payload
	for i := range n {
		if valid[i] = i%100 == 7; !valid[i] {
			continue
		}
		want[i>>3] |= 1 << (i & 7)
		for c := range ch {
			v := math.Float32bits(float32(i) + float32(c)/100)
			data = binary.LittleEndian.AppendUint32(data, v)
			binary.LittleEndian.PutUint32(want[(n+63)/64*8+4*(i*ch+c):], v)
		}
	}
	col, err := zvf.NewColumn("emb", "float32", ch, data)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := zvf.NewEdgeColumn(col, valid)
	if err != nil {
		t.Fatal(err)
	}
	meta := &payloadMeta{Kind: "bbox", EdgeAttributes: []zvf.AttrInfo{{Name: "emb", DType: "float32", Channels: ch}}}
	write := func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		e := &binaryEncoder{w: bw, m: meta}
		if err := e.writeEdgeAttribute(0, &ec); err != nil {
			return err
		}
		return bw.Flush()
	}
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if len(b) < 16 || binary.LittleEndian.Uint32(b) != blockEdgeAttr || binary.LittleEndian.Uint64(b[8:]) != uint64(len(want)) || !bytes.Equal(b[16:], want) {
		t.Fatalf("a block of %d bytes, want %d of payload after its header", len(b), len(want))
	}
	res := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := write(io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	})
	if got, rows := res.AllocedBytesPerOp(), int64(n*ec.RowBytes()); got > rows/16 {
		t.Fatalf("%d bytes allocated to write the block, against %d of rows a row an edge", got, rows)
	}
}
