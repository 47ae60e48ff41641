package neuroglancer_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestPlanLargerThanTheCacheIsBuiltOnce: a source's spatial index (the
// plan, here 4 MB for 50,000 polylines) that the cache cannot keep (a
// 2 MiB budget) is built once for the store version, not once per request:
// each cell or shard Range rebuilt it from every object manifest of level
// 0.
func TestPlanLargerThanTheCacheIsBuiltOnce(t *testing.T) {
	t.Parallel()
	const lines, per = 50_000, 3
	ctx := context.Background()
	pos := make([]float32, 0, 3*lines*per)
	offsets := []int{0}
	for l := range lines {
		x, y, z := float32(l%100)*10, float32(l/100%100)*10, float32(l/10000)*10
		for v := range per {
			pos = append(pos, x+float32(v), y+float32(v)/2, z+1)
		}
		offsets = append(offsets, (l+1)*per)
	}
	w := zvftest.Store(t, "mem://")
	if _, err := writer.WritePolylines(ctx, w, "lines", &writer.Polylines{Positions: pos, Offsets: offsets},
		writer.Options{ChunkShape: []float64{250, 250, 250}, BinShape: []float64{50, 50, 50}}); err != nil {
		t.Fatal(err)
	}
	st, err := zvf.Open(ctx, storage.Sub(w, "lines"), zvf.Options{Name: "scale", Cache: cache.New(64 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	ch := &countingCache{Cache: cache.New(2 << 20), loads: map[string]int{}, sizes: map[string]int64{}}
	ts := shardRoutes(t, st, neuroglancer.Options{Cache: ch, Sharded: neuroglancer.ShardNever})
	for _, path := range []string{"info", "spatial0/0_0_0", "spatial0/0_0_0", "by_id/7", "objects/7"} {
		if resp, body := apitest.Get(t, ts, "/ng/scale/annotations/"+path); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %.200s", path, resp.StatusCode, body)
		}
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	plans := 0
	for k, n := range ch.loads {
		if strings.Contains(k, "\x00plan\x00") {
			plans++
			if n != 1 || ch.sizes[k] <= 2<<20 {
				t.Errorf("%q: built %d times, %d bytes; want once, over the cache's 2 MiB", k, n, ch.sizes[k])
			}
		}
	}
	if plans != 1 {
		t.Errorf("%d plans built, want 1: %v", plans, ch.loads)
	}
}
