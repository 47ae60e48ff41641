package api

import (
	"bufio"
	"bytes"
	"context"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/synth"
)

// TestParallelFormattingSameBytes: text answers formatted on several
// cores are byte for byte the ones one core writes — for answers smaller
// than a segment, a few segments and many rounds, from batches (chunks) of
// under 1,000 rows gathered into runs, with object ids and every
// attribute.
func TestParallelFormattingSameBytes(t *testing.T) {
	ctx := context.Background()
	const n = 200_000
	st, err := synth.Streamlines(ctx, n, 3)
	if err != nil {
		t.Fatal(err)
	}
	s, err := zvf.Open(ctx, storage.Sub(st, "streamlines"), zvf.Options{Name: "streamlines", Cache: cache.New(256 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Level(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []int{500, 20_000, n} {
		lo, hi := synth.BoxFor(n, want, 0)
		meta := &payloadMeta{Kind: "bbox", Store: "streamlines", Dims: 3, VertexDType: l.VertexDType(), Attributes: l.Info().VertexAttributes, ObjectIDs: true}
		var text batchers
		for _, c := range []codec{jsonCodec{&text}, ndjsonCodec{&text}} {
			var outs [3]bytes.Buffer
			for k, workers := range []int{1, 2, 5} {
				enc := c.newEncoder()
				switch e := enc.(type) {
				case *jsonEncoder:
					e.par.rows.workers = workers
				case *ndjsonEncoder:
					e.par.rows.workers = workers
				}
				w := bufio.NewWriter(&outs[k])
				if err := enc.begin(w, meta); err != nil {
					t.Fatal(err)
				}
				res, err := l.BBox(ctx, zvf.BBoxQuery{Min: lo, Max: hi, Attributes: []string{"*"}}, enc.batch)
				if err != nil {
					t.Fatal(err)
				}
				if err := enc.end(&trailer{Count: res.Count}); err != nil {
					t.Fatal(err)
				}
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			for k := 1; k < len(outs); k++ {
				if !bytes.Equal(outs[0].Bytes(), outs[k].Bytes()) {
					t.Errorf("%s, ~%d vertices: %d bytes on one core, %d on %d", c.format(), want, outs[0].Len(), outs[k].Len(), []int{1, 2, 5}[k])
				}
			}
			if outs[0].Len() < want*10 {
				t.Fatalf("%s: only %d bytes for ~%d vertices", c.format(), outs[0].Len(), want)
			}
		}
	}
}
