package neuroglancer_test

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/cache"
)

// TestPlanLargerThanTheCacheIsSaid: a source's spatial index (here 4 MB
// for 50,000 polylines) that the cache cannot keep (a 2 MiB budget) is
// built again by every request of the source, since keeping it elsewhere
// would be memory the byte budget does not see. Only the operator can fix
// that (--cache-bytes), and nothing told them: the server now logs it,
// once for the store version however many requests rebuild it.
func TestPlanLargerThanTheCacheIsSaid(t *testing.T) {
	t.Parallel()
	st := gridPolylines(t, 50_000, 64<<20)
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
