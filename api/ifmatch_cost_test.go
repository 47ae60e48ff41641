package api_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestIfMatchRefusalReadsNoChunks: where the answer's ETag is known before
// its body (the store version and the request), an If-Match that names
// none of it is refused before the query runs: the 412 reads no chunk.
// Before, the handler matched and encoded up to the 256 KiB hold-back (the
// whole answer, for one smaller) and only then turned its 200 into the
// 412. A matching If-Match reads what the plain request does.
func TestIfMatchRefusalReadsNoChunks(t *testing.T) {
	t.Parallel()
	const other = `"0123456789abcdef01234567"`
	keys := &keyLog{Store: zvftest.Store(t, filepath.Join(fixtures, "points_pyramid.zarrvectors"))}
	_, srv := handleServer(t, keys, zvf.Options{Name: "p"}, zvf.Watch{}, api.Options{})
	for _, path := range []string{
		"/api/v1/stores/p/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&f=ndjson",
		"/api/v1/stores/p/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&limit=5",
		"/api/v1/stores/p/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&level=auto&limit=100",
		"/api/v1/stores/p/count?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9",
		"/api/v1/stores/p/density?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&shape=4,4,4",
	} {
		code, hdr, body := serveFull(t, srv.Handler(), path) // opens what the route's first request opens
		if code != 200 || hdr.Get("ETag") == "" {
			t.Fatalf("%s: %d %.200s", path, code, body)
		}
		keys.reset()
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("If-Match", other)
		code, hdr, body = serveRequest(t, srv.Handler(), req)
		if code != 412 || !strings.Contains(string(body), "precondition-failed") || hdr.Get("ETag") != "" {
			t.Errorf("%s, If-Match %s: %d, ETag %q: %.200s", path, other, code, hdr.Get("ETag"), body)
		}
		if got := keys.chunkReads(); len(got) != 0 {
			t.Errorf("%s: the 412 read %d chunks (%v), want none", path, len(got), got[:min(len(got), 5)])
		}
		// The same request with its own tag reads chunks: the count above
		// is not zero because of a cache.
		_, plain, _ := serveFull(t, srv.Handler(), path)
		keys.reset()
		req = httptest.NewRequest("GET", path, nil)
		req.Header.Set("If-Match", plain.Get("ETag"))
		if code, _, body := serveRequest(t, srv.Handler(), req); code != 200 {
			t.Errorf("%s, its own tag: %d %.200s", path, code, body)
		}
		if len(keys.chunkReads()) == 0 {
			t.Errorf("%s: the 200 read no chunk: the test cannot tell a 412 that reads none", path)
		}
	}
}

// keyLog keeps the keys of the objects read.
type keyLog struct {
	storage.Store
	mu   sync.Mutex
	read []string
}

func (k *keyLog) Get(ctx context.Context, key string, o storage.ReadOptions) (storage.Object, error) {
	k.mu.Lock()
	k.read = append(k.read, key)
	k.mu.Unlock()
	return k.Store.Get(ctx, key, o)
}

func (k *keyLog) reset() {
	k.mu.Lock()
	k.read = nil
	k.mu.Unlock()
}

// chunkReads are the keys read of chunks (Zarr v3's "c/" keys).
func (k *keyLog) chunkReads() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, key := range k.read {
		if strings.Contains(key, "/c/") || strings.HasPrefix(key, "c/") {
			out = append(out, key)
		}
	}
	return out
}
