package zvf_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestLevelChunkBounds: a level's chunk_bounds is the box of the grid
// cells its chunks occupy, negative cells included, so a viewer can tell
// bounds that are far larger than the data (or miss some of it) without
// reading a chunk.
func TestLevelChunkBounds(t *testing.T) {
	ctx := context.Background()
	mem := zvftest.Store(t, "mem://")
	pos := []float32{-5, 0, 250, 190, 10, 299.5, 40, 199, 200}
	if _, err := writer.WritePoints(ctx, mem, "p", &writer.PointCloud{Positions: pos}, writer.Options{ChunkShape: []float64{100, 100, 100}}); err != nil {
		t.Fatal(err)
	}
	l := zvftest.OpenLevel(t, storage.Sub(mem, "p"), zvf.Options{Name: "p", Cache: cache.New(1 << 20)}, 0)
	want := [][]float64{{-100, 0, 200}, {200, 200, 300}}
	if got := l.Info().ChunkBounds; !reflect.DeepEqual(got, want) {
		t.Errorf("chunk_bounds %v; want %v", got, want)
	}
}
