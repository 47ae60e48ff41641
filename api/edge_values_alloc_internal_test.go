package api

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
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

// edgeValuesPage is a JSON page's end: n edges (a chain) each with a
// ch-channel float32 value, every tenth without one.
func edgeValuesPage(t testing.TB, n, ch int) *trailer {
	valid := make([]bool, n)
	edges := make([]int64, 0, 2*n)
	var data []byte
	for i := range n {
		edges = append(edges, int64(i+1), int64(i))
		if valid[i] = i%10 != 3; valid[i] {
			for c := range ch {
				data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(i)+float32(c)/100))
			}
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
	return &trailer{Count: int64(n + 1), Edges: edges, EdgeAttributes: []zvf.EdgeColumn{ec}, Page: true}
}

// writeJSONEnd writes a JSON answer of no rows closed by t to w.
func writeJSONEnd(w io.Writer, t *trailer) error {
	var text batchers
	e := jsonCodec{&text}.newEncoder()
	bw := bufio.NewWriter(w)
	meta := &payloadMeta{Kind: "bbox", EdgeAttributes: []zvf.AttrInfo{{Name: "emb", DType: "float32", Channels: 16}}}
	if err := e.begin(bw, meta, nil); err != nil {
		return err
	}
	if err := e.end(t); err != nil {
		return err
	}
	return bw.Flush()
}

// TestJSONEdgeValuesStreamed: a JSON page's edges and edge values (here
// 50,000 edges of a 16-channel float32 attribute, ~7 MB of text) go out
// as they are formatted, a few KiB at a time. Before, the page's end was
// built whole in memory, its text's buffer grown to ~8 MiB and more
// allocated on the way, beside the values it formats; now writing it
// allocates a small fraction of its text, and the text is the same:
// every edge, its value or null.
func TestJSONEdgeValuesStreamed(t *testing.T) {
	const n, ch = 50000, 16
	tr := edgeValuesPage(t, n, ch)
	var buf bytes.Buffer
	if err := writeJSONEnd(&buf, tr); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Edges          [][2]int64              `json:"edges"`
		EdgeAttributes map[string][]*[]float32 `json:"edge_attributes"`
		Count          int64                   `json:"count"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v (…%q)", err, buf.Bytes()[max(0, buf.Len()-80):])
	}
	vals := got.EdgeAttributes["emb"]
	if len(got.Edges) != n || len(vals) != n || got.Count != n+1 {
		t.Fatalf("%d edges, %d values, count %d; want %d edges", len(got.Edges), len(vals), got.Count, n)
	}
	for i, v := range vals {
		switch {
		case got.Edges[i] != [2]int64{int64(i + 1), int64(i)}:
			t.Fatalf("edge %d: %v", i, got.Edges[i])
		case (v != nil) != (i%10 != 3):
			t.Fatalf("edge %d: %v", i, v)
		case v != nil && (len(*v) != ch || (*v)[0] != float32(i) || (*v)[ch-1] != float32(i)+float32(ch-1)/100):
			t.Fatalf("edge %d: %v", i, *v)
		}
	}
	res := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := writeJSONEnd(io.Discard, tr); err != nil {
				b.Fatal(err)
			}
		}
	})
	if a := res.AllocedBytesPerOp(); a > int64(buf.Len())/16 {
		t.Fatalf("%d bytes allocated to write %d bytes of a page's edges and values", a, buf.Len())
	}
}

// BenchmarkJSONEdgeValuesPage: what writing a JSON page's edges and their
// values allocates (TestJSONEdgeValuesStreamed's page).
func BenchmarkJSONEdgeValuesPage(b *testing.B) {
	tr := edgeValuesPage(b, 50000, 16)
	b.ReportAllocs()
	for b.Loop() {
		if err := writeJSONEnd(io.Discard, tr); err != nil {
			b.Fatal(err)
		}
	}
}
