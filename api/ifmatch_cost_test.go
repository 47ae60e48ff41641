package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/cache"
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

// TestIfMatchRefusalOfFoundResources: a chunk, an object and the
// Neuroglancer annotation files are known to exist from the store's
// metadata (a chunk key, an object's manifest) or the source's plan (a
// cell of its grid, an annotation id below its count), so an If-Match
// that names none of their ETag is refused once that is known, before
// their data is read. Before, the handler read the chunks (an object, its
// every vertex chunk) and encoded the answer, and only its 200 became the
// 412. What is missing is still its 404, and a matching If-Match reads.
func TestIfMatchRefusalOfFoundResources(t *testing.T) {
	t.Parallel()
	const other = `"0123456789abcdef01234567"`
	keys := &keyLog{Store: zvftest.Store(t, filepath.Join(fixtures, "points_pyramid.zarrvectors"))}
	_, srv := handleServer(t, keys, zvf.Options{Name: "p"}, zvf.Watch{}, api.Options{Cache: cache.New(64 << 20)})
	for _, tc := range []struct{ warm, path string }{
		// warm opens what the route's first request opens (the level, the
		// object index, the source's plan), from other chunks than path's.
		{"/api/v1/stores/p/levels/0/chunks/0.0.0", "/api/v1/stores/p/levels/0/chunks/2.2.2?attributes=*"},
		{"/api/v1/stores/p/objects/0?level=1", "/api/v1/stores/p/objects/0?attributes=*"},
		{"/api/v1/stores/p/objects/0/manifest?level=1", "/api/v1/stores/p/objects/2/manifest"},
		{"/ng/p/annotations/spatial1/0_0_0", "/ng/p/annotations/spatial1/3_3_3"},
		{"/ng/p/annotations/by_id/0", "/ng/p/annotations/by_id/10000"},
		{"/ng/p/density/1/0-2_0-2_0-2", "/ng/p/density/0/0-4_0-4_0-4"},
	} {
		if code, _, body := serveFull(t, srv.Handler(), tc.warm); code != 200 {
			t.Fatalf("%s: %d %.200s", tc.warm, code, body)
		}
		keys.reset()
		req := httptest.NewRequest("GET", tc.path, nil)
		req.Header.Set("If-Match", other)
		code, hdr, body := serveRequest(t, srv.Handler(), req)
		if code != 412 || !strings.Contains(string(body), "precondition-failed") || hdr.Get("ETag") != "" {
			t.Errorf("%s, If-Match %s: %d, ETag %q: %.200s", tc.path, other, code, hdr.Get("ETag"), body)
		}
		// An object is found by its manifest: that is read, no vertex.
		got := slices.DeleteFunc(keys.chunkReads(), func(k string) bool { return strings.Contains(k, "/object_index/") })
		if len(got) != 0 {
			t.Errorf("%s: the 412 read %d chunks (%v), want none", tc.path, len(got), got[:min(len(got), 5)])
		}
		keys.reset()
		code, _, body = serveFull(t, srv.Handler(), tc.path)
		if code != 200 || len(keys.chunkReads()) == 0 {
			t.Errorf("%s: %d after reading %d chunks: the test cannot tell a 412 that reads none: %.200s", tc.path, code, len(keys.chunkReads()), body)
		}
	}
	// Skeletons, multilod meshes, legacy mesh fragments and an object's
	// annotations start by finding the object in the index.
	for _, tc := range []struct{ fixture, warm, path string }{
		{"points_pyramid", "/ng/p/annotations/objects/0", "/ng/p/annotations/objects/1"},
		{"skeleton", "/ng/p/skeletons/info", "/ng/p/skeletons/1"},
		{"mesh", "/ng/p/multilod/info", "/ng/p/multilod/1"},
		{"mesh", "/ng/p/meshes/info", "/ng/p/meshes/frag/1"},
	} {
		keys := &keyLog{Store: zvftest.Store(t, filepath.Join(fixtures, tc.fixture+".zarrvectors"))}
		_, srv := handleServer(t, keys, zvf.Options{Name: "p"}, zvf.Watch{}, api.Options{Cache: cache.New(64 << 20)})
		if code, _, body := serveFull(t, srv.Handler(), tc.warm); code != 200 {
			t.Fatalf("%s %s: %d %.200s", tc.fixture, tc.warm, code, body)
		}
		keys.reset()
		req := httptest.NewRequest("GET", tc.path, nil)
		req.Header.Set("If-Match", other)
		code, _, body := serveRequest(t, srv.Handler(), req)
		got := slices.DeleteFunc(keys.chunkReads(), func(k string) bool { return strings.Contains(k, "/object_index/") })
		if code != 412 || !strings.Contains(string(body), "precondition-failed") || len(got) != 0 {
			t.Errorf("%s %s, If-Match %s: %d after reading %d chunks (%v): %.200s", tc.fixture, tc.path, other, code, len(got), got[:min(len(got), 5)], body)
		}
		keys.reset()
		if code, _, body = serveFull(t, srv.Handler(), tc.path); code != 200 || len(keys.chunkReads()) == 0 {
			t.Errorf("%s %s: %d after reading %d chunks: the test cannot tell a 412 that reads none: %.200s", tc.fixture, tc.path, code, len(keys.chunkReads()), body)
		}
		req = httptest.NewRequest("GET", strings.TrimSuffix(tc.path, "1")+"999999", nil)
		req.Header.Set("If-Match", other)
		if code, _, body := serveRequest(t, srv.Handler(), req); code != 404 || !strings.Contains(string(body), "999999") {
			t.Errorf("%s %s999999, If-Match %s: %d %.200s, want its 404", tc.fixture, strings.TrimSuffix(tc.path, "1"), other, code, body)
		}
	}
	// What does not exist is its 404 with any If-Match.
	for path, want := range map[string]string{
		"/api/v1/stores/p/levels/0/chunks/9.9.9":                   "no chunk 9.9.9",
		"/api/v1/stores/p/levels/0/chunks/0.0.0?attributes=nosuch": "nosuch",
		"/ng/p/annotations/by_id/20000":                            "no point annotation 20000",
		"/ng/p/annotations/spatial1/9_9_9":                         "9_9_9",
		"/ng/p/density/0/4-8_0-4_0-4":                              "is no chunk of density scale",
		"/api/v1/stores/p/objects/999999/manifest":                 "999999",
	} {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("If-Match", other)
		if code, _, body := serveRequest(t, srv.Handler(), req); code != 404 || !strings.Contains(string(body), want) {
			t.Errorf("%s, If-Match %s: %d %.300s, want its 404 saying %q", path, other, code, body, want)
		}
	}
}

// TestIfMatchRefusesShardFilesUnbuilt: a Neuroglancer shard file's ETag
// is known before the shard is built (the store version, the shard's
// path, the coding and the options that shape specs), and whether it
// holds a key is known from the source's plan (cells, ids) or its object
// list: a stale If-Match is refused 412 with no chunk read, a shard that
// holds none is still its 404. Before, the shard was built — every chunk
// it holds read and encoded — and only its 200 became the 412. The tag
// is the same for the same shard asked twice, and another for a server
// whose --max-vertices reshapes the levels.
func TestIfMatchRefusesShardFilesUnbuilt(t *testing.T) {
	t.Parallel()
	const other = `"0123456789abcdef01234567"`
	type sharding struct {
		ShardBits int `json:"shard_bits"`
	}
	type keyed struct {
		Key      string    `json:"key"`
		Sharding *sharding `json:"sharding"`
	}
	for _, tc := range []struct{ fixture, source string }{
		{"points_pyramid", "annotations"},
		{"skeleton", "skeletons"},
	} {
		keys := &keyLog{Store: zvftest.Store(t, filepath.Join(fixtures, tc.fixture+".zarrvectors"))}
		o := api.Options{Cache: cache.New(64 << 20), NGSharded: neuroglancer.ShardAlways}
		_, srv := handleServer(t, keys, zvf.Options{Name: "p"}, zvf.Watch{}, o)
		base := "/ng/p/" + tc.source
		code, _, body := serveFull(t, srv.Handler(), base+"/info") // builds the plan or lists the objects
		if code != 200 {
			t.Fatalf("%s: %d %.200s", base, code, body)
		}
		var inf struct {
			keyed
			ByID    keyed   `json:"by_id"`
			Spatial []keyed `json:"spatial"`
		}
		if err := json.Unmarshal(body, &inf); err != nil {
			t.Fatal(err)
		}
		dirs := map[string]*sharding{base: inf.Sharding}
		if tc.source == "annotations" {
			dirs = map[string]*sharding{base + "/" + inf.ByID.Key: inf.ByID.Sharding, base + "/" + inf.Spatial[0].Key: inf.Spatial[0].Sharding}
		}
		for dir, sh := range dirs {
			if sh == nil {
				t.Fatalf("%s: not sharded: %.300s", dir, body)
			}
			refused := 0
			for n := range 1 << sh.ShardBits {
				path := fmt.Sprintf("%s/%x.shard", dir, n)
				keys.reset()
				req := httptest.NewRequest("GET", path, nil)
				req.Header.Set("If-Match", other)
				code, hdr, body := serveRequest(t, srv.Handler(), req)
				if got := slices.DeleteFunc(keys.chunkReads(), func(k string) bool { return strings.Contains(k, "/object_index/") }); len(got) != 0 {
					t.Errorf("%s, If-Match %s: %d after reading %d chunks (%v), want none", path, other, code, len(got), got[:min(len(got), 5)])
				}
				if code == 404 && strings.Contains(string(body), "holds no key") {
					continue
				}
				if code != 412 || !strings.Contains(string(body), "precondition-failed") || hdr.Get("ETag") != "" {
					t.Errorf("%s, If-Match %s: %d, ETag %q: %.200s", path, other, code, hdr.Get("ETag"), body)
					continue
				}
				refused++
				keys.reset()
				code, first, body := serveFull(t, srv.Handler(), path)
				if code != 200 || len(keys.chunkReads()) == 0 {
					t.Errorf("%s: %d after reading %d chunks: the test cannot tell a 412 that reads none: %.200s", path, code, len(keys.chunkReads()), body)
				}
				_, again, _ := serveFull(t, srv.Handler(), path)
				if first.Get("ETag") == "" || again.Get("ETag") != first.Get("ETag") {
					t.Errorf("%s asked twice: ETag %q then %q, want one", path, first.Get("ETag"), again.Get("ETag"))
				}
				req = httptest.NewRequest("GET", path, nil)
				req.Header.Set("If-Match", first.Get("ETag"))
				if code, _, body := serveRequest(t, srv.Handler(), req); code != 200 {
					t.Errorf("%s, If-Match its own tag: %d %.200s", path, code, body)
				}
				o.MaxVertices = 800
				_, narrow := handleServer(t, keys, zvf.Options{Name: "p"}, zvf.Watch{}, o)
				if _, hdr, _ := serveFull(t, narrow.Handler(), path); hdr.Get("ETag") == first.Get("ETag") {
					t.Errorf("%s: ETag %s under --max-vertices 800 too", path, first.Get("ETag"))
				}
			}
			if refused == 0 {
				t.Errorf("%s: no shard file holds a key", dir)
			}
		}
	}
}
