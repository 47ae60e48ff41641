package zvf

import (
	"context"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/synth"
)

// TestLevelTableBoundByRowsRead: a level whose metadata understates its
// vertex count passes the table's size test on that count, but the rows
// its chunks hold decide: past the bound, no table is built (the cache's
// share is not exceeded on the metadata's word) and answers take the
// per-chunk path.
func TestLevelTableBoundByRowsRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := synth.Streamlines(ctx, 400_000, 1)
	if err != nil {
		t.Fatal(err)
	}
	sub := storage.Sub(st, "streamlines")
	probe, err := Open(ctx, sub, Options{Name: "lines"})
	if err != nil {
		t.Fatal(err)
	}
	real := probe.levels[1].meta.VertexCount
	claimed := real / 100
	// A budget whose sixteenth holds the claimed rows' table, not the
	// real rows'.
	small, large := probe.levels[1].tableBytes(claimed), probe.levels[1].tableBytes(real)
	if 2*small >= large {
		t.Fatalf("tables of %d and %d bytes: no budget tells them apart", small, large)
	}
	s, err := Open(ctx, sub, Options{Name: "lines", Cache: cache.New(tableShare * (small + large) / 2)})
	if err != nil {
		t.Fatal(err)
	}
	l := s.levels[1]
	l.meta.VertexCount = claimed
	whole := BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Connectivity: true, Wire: true}
	for range 3 {
		res, err := l.BBox(ctx, whole, func(*Batch) error { return nil })
		if err != nil || res.Count != real {
			t.Fatalf("%d rows, %v; want %d", res.Count, err, real)
		}
	}
	if !l.table.fit {
		t.Fatal("the claimed rows did not pass the size test")
	}
	if a := l.table.answers.Load(); a != 0 || !l.table.off.Load() {
		t.Fatalf("%d answers from a table past its bound (off %v)", a, l.table.off.Load())
	}
}
