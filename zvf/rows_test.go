package zvf_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestChunkObjects: every chunk's row owners are the object ids a bbox over
// the whole level reports for the same rows; a level without an object
// index answers nil; an unknown chunk is ErrNotFound.
func TestChunkObjects(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"points_pyramid", "polylines", "graph", "points_bins"} {
		t.Run(name, func(t *testing.T) {
			st, _ := ref07.open(t, name)
			l, err := st.Level(0)
			if err != nil {
				t.Fatal(err)
			}
			byChunk := map[string][]int64{}
			_, err = l.BBox(ctx, zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}}, func(b *zvf.Batch) error {
				if b.ObjectIDs != nil {
					byChunk[b.Chunk.String()] = append(byChunk[b.Chunk.String()], b.ObjectIDs...)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range l.Keys() {
				got, err := l.ChunkObjects(ctx, k)
				if err != nil {
					t.Fatal(err)
				}
				if want := byChunk[k.String()]; !slices.Equal(got, want) {
					t.Fatalf("chunk %s: owners %v, bbox says %v", k, got, want)
				}
			}
			if _, err := l.ChunkObjects(ctx, zvf.Key{99, 99, 99}); !errors.Is(err, zvf.ErrNotFound) {
				t.Fatalf("unknown chunk: %v", err)
			}
		})
	}
}

// TestObjectAttributes: the rows are those Object reports, and an id past
// the object index is ErrNotFound.
func TestObjectAttributes(t *testing.T) {
	ctx := context.Background()
	st, _ := ref07.open(t, "points_pyramid")
	for _, n := range st.Levels() {
		l, err := st.Level(n)
		if err != nil {
			t.Fatal(err)
		}
		for id := range l.Info().ObjectCount {
			got, err := l.ObjectAttributes(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			o := zvftest.Object(t, l, id, nil)
			if len(got) != len(o.ObjectAttributes) || len(got) == 0 {
				t.Fatalf("level %d object %d: %d columns, Object has %d", n, id, len(got), len(o.ObjectAttributes))
			}
			for i := range got {
				if got[i].Name != o.ObjectAttributes[i].Name || !slices.Equal(got[i].Data, o.ObjectAttributes[i].Data) {
					t.Fatalf("level %d object %d column %d differs", n, id, i)
				}
			}
		}
		if _, err := l.ObjectAttributes(ctx, l.Info().ObjectCount); !errors.Is(err, zvf.ErrNotFound) {
			t.Fatalf("id past the index: %v", err)
		}
	}
}
