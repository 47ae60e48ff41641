package neuroglancer_test

import (
	"context"
	"log/slog"
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

// TestPlanLargerThanTheCacheIsSaid: a source's spatial index (here 4 MB
// for 50,000 polylines) that the cache cannot keep (a 2 MiB budget) is
// built again by every request of the source, since keeping it elsewhere
// would be memory the byte budget does not see. Only the operator can fix
// that (--cache-bytes), and nothing told them: the server now logs it,
// once for the store version however many requests rebuild it.
func TestPlanLargerThanTheCacheIsSaid(t *testing.T) {
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
	var logs apitest.Buffer
	ts := shardRoutes(t, st, neuroglancer.Options{Cache: cache.New(2 << 20), Sharded: neuroglancer.ShardNever,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for _, path := range []string{"info", "spatial0/0_0_0", "spatial0/0_0_0", "by_id/7"} {
		if resp, body := apitest.Get(t, ts, "/ng/scale/annotations/"+path); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %.200s", path, resp.StatusCode, body)
		}
	}
	if n := strings.Count(logs.String(), "raise --cache-bytes"); n != 1 || !strings.Contains(logs.String(), "store=scale") {
		t.Fatalf("%d warnings, want 1 naming the store:\n%s", n, logs.String())
	}
}
