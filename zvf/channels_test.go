package zvf_test

import (
	"context"
	"errors"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/memstore"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// channelStore writes two chunks (0.0.0 and 1.0.0) of two rows each with
// an attribute "rgba" of ch channels and no channel_names, as the
// reference's line, graph and mesh writers lay it out.
func channelStore(t *testing.T, ch int) *memstore.Store {
	t.Helper()
	mem := memstore.New()
	var w []float32
	for i := range 4 * ch {
		w = append(w, float32(i))
	}
	pl := &writer.Polylines{Positions: []float32{1, 1, 1, 2, 2, 2, 13, 3, 3, 14, 4, 4}, Offsets: []int{0, 2, 4},
		Attributes: []writer.Attribute{writer.Float32Attribute("rgba", ch, w)}}
	if _, err := writer.WritePolylines(context.Background(), mem, "lines", pl, writer.Options{ChunkShape: []float64{10, 10, 10}}); err != nil {
		t.Fatal(err)
	}
	return mem
}

func moveBlob(t *testing.T, from, to *memstore.Store, key string, edit func([]byte) []byte) {
	t.Helper()
	ctx := context.Background()
	obj, err := from.Get(ctx, key, storage.ReadOptions{Len: -1, Max: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := to.Put(ctx, key, edit(obj.Data)); err != nil {
		t.Fatal(err)
	}
}

// TestSampledChannels: an attribute that names no channel_names is
// declared (descriptor, answers' columns) with the channels its chunks
// hold, learnt from a chunk as the level opens, past one that is corrupt;
// a chunk holding another count is corrupt, not a column of other rows.
func TestSampledChannels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const attr = "lines/0/vertex_attributes/rgba/"
	same := func(b []byte) []byte { return b }
	for _, tc := range []struct {
		name    string
		store   func(t *testing.T) *memstore.Store
		want    int    // channels declared
		corrupt string // the chunk a box over fails as corrupt ("" none)
	}{
		{"four", func(t *testing.T) *memstore.Store { return channelStore(t, 4) }, 4, ""},
		{"first chunk's attribute truncated", func(t *testing.T) *memstore.Store {
			s := channelStore(t, 4)
			moveBlob(t, s, s, attr+"0.0.0/c/0", func(b []byte) []byte { return b[:len(b)-1] })
			return s
		}, 4, "0.0.0"},
		{"a chunk of another count", func(t *testing.T) *memstore.Store {
			s, other := channelStore(t, 2), channelStore(t, 4)
			moveBlob(t, other, s, attr+"1.0.0/zarr.json", same)
			moveBlob(t, other, s, attr+"1.0.0/c/0", same)
			return s
		}, 2, "1.0.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cache.New(1 << 20)
			st, err := zvf.Open(ctx, storage.Sub(tc.store(t), "lines"), zvf.Options{Name: "lines", Cache: c})
			if err != nil {
				t.Fatal(err)
			}
			if n := c.Stats().Items; n != 0 {
				t.Errorf("the open left %d cache entries", n)
			}
			l, err := st.Level(0)
			if err != nil {
				t.Fatal(err)
			}
			if a := l.Info().VertexAttributes; len(a) != 1 || a[0].Channels != tc.want {
				t.Fatalf("declared %+v, want rgba with %d channels", a, tc.want)
			}
			for _, chunk := range []struct {
				key      string
				min, max []float64
			}{{"0.0.0", []float64{0, 0, 0}, []float64{9, 9, 9}}, {"1.0.0", []float64{10, 0, 0}, []float64{19, 9, 9}}} {
				var cols []zvf.Column
				_, err := l.BBox(ctx, zvf.BBoxQuery{Min: chunk.min, Max: chunk.max, Attributes: []string{"rgba"}}, func(b *zvf.Batch) error {
					cols = append(cols, b.Attributes...)
					return nil
				})
				if chunk.key == tc.corrupt {
					if !errors.Is(err, zvf.ErrCorrupt) {
						t.Errorf("%s: %v, want corrupt", chunk.key, err)
					}
					continue
				}
				if err != nil || len(cols) != 1 || cols[0].Channels != tc.want || len(cols[0].Data) != 2*tc.want*4 {
					t.Errorf("%s: %v, columns %+v", chunk.key, err, cols)
				}
			}
		})
	}
}
