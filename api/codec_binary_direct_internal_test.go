package api

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
)

// countingWriter records every write it is given.
type countingWriter struct {
	bytes.Buffer
	writes []int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes = append(c.writes, len(p))
	return c.Buffer.Write(p)
}

// TestBinaryDirectBlocks: with large payloads written past the body's
// buffer (writeDirect), an answer is the same bytes in the same order as
// through the buffer, whatever mix of small and large blocks it holds,
// and a large payload reaches the writer in one piece, not copied through
// the buffer.
func TestBinaryDirectBlocks(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 3))
	rows := []int{1, 100, directBlock / 12, directBlock/12 + 1, 30_000, 7, 200_000, 3}
	batches := make([]*zvf.Batch, len(rows))
	for i, n := range rows {
		data := make([]byte, 12*n)
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		ids := make([]int64, n)
		for j := range ids {
			ids[j] = r.Int64()
		}
		batches[i] = &zvf.Batch{Rows: n, Vertices: zvf.Column{Channels: 3, Data: data}, ObjectIDs: ids}
	}
	answer := func(direct bool) *countingWriter {
		var out countingWriter
		bw := bufio.NewWriterSize(&out, 64<<10)
		e := &binaryEncoder{}
		if direct {
			e.writeDirect(&out)
		}
		var mem answerMem
		if err := e.begin(bw, &payloadMeta{Kind: "bbox", Dims: 3, ObjectIDs: true}, &mem); err != nil {
			t.Fatal(err)
		}
		for _, b := range batches {
			if err := e.batch(b); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.end(&trailer{Count: 42, Edges: []int64{0, 1, 1, 2}}); err != nil {
			t.Fatal(err)
		}
		if err := bw.Flush(); err != nil {
			t.Fatal(err)
		}
		return &out
	}
	buffered, direct := answer(false), answer(true)
	if !bytes.Equal(buffered.Bytes(), direct.Bytes()) {
		t.Fatalf("direct blocks changed the answer: %d bytes against %d", direct.Len(), buffered.Len())
	}
	whole := map[int]bool{}
	for _, n := range direct.writes {
		whole[n] = true
	}
	for _, b := range batches {
		if n := len(b.Vertices.Data); n >= directBlock && !whole[n] {
			t.Errorf("a %d-byte vertex block did not go out in one write: %v", n, direct.writes)
		}
	}
}
