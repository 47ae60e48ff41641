package neuroglancer_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
)

// TestPlanLargerThanTheCacheIsRefused: a source's spatial index (here 4 MB
// for 50,000 polylines) that the cache cannot keep (a 2 MiB budget) was
// built again from every object's manifest by every request of the source
// (half a second and 50 MB each, BenchmarkPlanLargerThanCache), with only
// a log line saying so. Now it is built once per store version: that
// request and every later one of the source (info, cells, by_id) is a 413
// problem naming the index's size and --cache-bytes, answered at once, and
// the operator is told once. A budget that holds it serves the source.
func TestPlanLargerThanTheCacheIsRefused(t *testing.T) {
	t.Parallel()
	st := gridPolylines(t, 50_000, 64<<20)
	var logs apitest.Buffer
	ch := &countingCache{Cache: cache.New(2 << 20), loads: map[string]int{}, sizes: map[string]int64{}}
	ts := shardRoutes(t, st, neuroglancer.Options{Cache: ch, Sharded: neuroglancer.ShardNever,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for _, path := range []string{"info", "spatial0/0_0_0", "spatial0/0_0_0", "by_id/7", "objects/7"} {
		resp, body := apitest.Get(t, ts, "/ng/scale/annotations/"+path)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "raise --cache-bytes above") ||
			!strings.Contains(string(body), "--cache-bytes 2097152") || !strings.Contains(string(body), "spatial index takes") {
			t.Fatalf("%s: %d %.300s", path, resp.StatusCode, body)
		}
	}
	plans := 0
	for k, n := range ch.loads {
		if strings.Contains(k, "plan\x00polyline") {
			plans += n
		}
	}
	if plans != 1 {
		t.Errorf("the index was built %d times for five requests, want once", plans)
	}
	if n := strings.Count(logs.String(), "raise --cache-bytes"); n != 1 || !strings.Contains(logs.String(), "store=scale") {
		t.Fatalf("%d warnings, want 1 naming the store:\n%s", n, logs.String())
	}

	// Through the API: a problem document, for each of the first requests
	// that share the one build too.
	_, api1 := newServer(t, api.Options{Stores: []*zvf.Store{st}, Cache: cache.New(2 << 20), NGSharded: neuroglancer.ShardNever})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			resp, body := apitest.Get(t, api1, fmt.Sprintf("/ng/scale/annotations/spatial0/0_0_%d", i%2))
			var p api.Problem
			if resp.StatusCode != http.StatusRequestEntityTooLarge || json.Unmarshal(body, &p) != nil || !strings.HasSuffix(p.Type, "/too-large") ||
				!strings.Contains(p.Detail, "raise --cache-bytes") {
				t.Errorf("through the API: %d %.300s", resp.StatusCode, body)
			}
		})
	}
	wg.Wait()
	// A cache that holds it serves the source.
	_, api2 := newServer(t, api.Options{Stores: []*zvf.Store{st}, Cache: cache.New(64 << 20), NGSharded: neuroglancer.ShardNever})
	if resp, body := apitest.Get(t, api2, "/ng/scale/annotations/spatial0/0_0_0"); resp.StatusCode != http.StatusOK {
		t.Fatalf("a 64 MiB cache: %d %.300s", resp.StatusCode, body)
	}
}
