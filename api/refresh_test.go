package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob/s3blob"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore/s3store"
	"github.com/zvfserve/zvfserve/zvf/storage/localfs"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// uploadTree copies a local store folder into w, then deletes every object
// w holds that the folder does not (a pipeline rewriting a prefix).
func uploadTree(t *testing.T, w storage.Writer, dir string) {
	t.Helper()
	uploadTreeWithout(t, w, dir, nil)
}

// uploadTreeWithout is uploadTree as if the folder lacked what is under
// each of skipped (slash-separated, relative to dir).
func uploadTreeWithout(t *testing.T, w storage.Writer, dir string, skipped []string) {
	t.Helper()
	if err := syncTree(context.Background(), w, dir, skipped); err != nil {
		t.Fatal(err)
	}
}

// syncTree is uploadTreeWithout returning its error, for a writer that
// runs outside the test's goroutine (where t.Fatal must not be called).
func syncTree(ctx context.Context, w storage.Writer, dir string, skipped []string) error {
	keep := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case slices.Contains(skipped, filepath.ToSlash(rel)) && d.IsDir():
			return fs.SkipDir
		case slices.Contains(skipped, filepath.ToSlash(rel)), d.IsDir():
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		keep[filepath.ToSlash(rel)] = true
		return w.Put(ctx, filepath.ToSlash(rel), b)
	})
	if err != nil {
		return fmt.Errorf("upload %s: %w", dir, err)
	}
	var stale []string
	if err := w.Walk(ctx, "", func(k string, _ storage.Attrs) error {
		if !keep[k] {
			stale = append(stale, k)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("list after uploading %s: %w", dir, err)
	}
	for _, k := range stale {
		if err := w.Delete(ctx, k); err != nil {
			return fmt.Errorf("delete stale %s: %w", k, err)
		}
	}
	return nil
}

// pruneEmptyDirs removes the folders a local rewrite emptied, as a
// pipeline that rewrites a store on disk would (object stores have no
// empty "folders" to leave behind).
func pruneEmptyDirs(root string) {
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && p != root {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- { // deepest first
		_ = os.Remove(dirs[i]) // fails, harmlessly, when not empty
	}
}

// localServer serves the folder dir under the store name.
func localServer(t *testing.T, name, dir string) *api.Server {
	t.Helper()
	srv := apitest.New(t, api.Options{Stores: []*zvf.Store{apitest.Open(t, dir, name, cache.New(16<<20))}})
	return srv
}

// checkReplacedObjects serves a store from target (a bucket URL) through
// a watching handle, rewrites it in place three times — with one chunk
// changed (same size), with another store, with a store that does not
// open — and after each Refresh checks every answer equals the local-disk
// answer for the new content, and that ETags changed.
func checkReplacedObjects(t *testing.T, target string) {
	ctx := context.Background()
	w := zvftest.StoreWith(t, target, s3Drivers())
	upload := func(t *testing.T, w storage.Writer, dir string) {
		t.Helper()
		uploadTree(t, w, dir)
		if filepath.IsAbs(target) {
			pruneEmptyDirs(target)
		}
	}
	upload(t, w, filepath.Join(fixtures, "graph.zarrvectors"))
	// Object stores stamp whole seconds: a version opened in the second of
	// its last write cannot tell that write from a later one, and waits.
	settled(t, w)
	ch := cache.New(64 << 20)
	hs, remote := watchedServer(t, map[string]storage.Store{"graph": w}, ch, api.Options{Cache: ch})
	h := hs["graph"]
	if _, err := h.Current(); err != nil {
		t.Fatal(err)
	}
	paths := []string{
		"/api/v1/stores/graph",
		"/api/v1/stores/graph/bbox?min=-1e6,-1e6,-1e6&max=1e6,1e6,1e6&attributes=*",
		"/api/v1/stores/graph/bbox?min=-1e6,-1e6,-1e6&max=1e6,1e6,1e6&f=bin",
		"/api/v1/stores/graph/objects/1?attributes=*",
		"/api/v1/stores/graph/objects/1/manifest",
		"/api/v1/stores/graph/levels/0/chunks",
	}
	compare := func(step string, local *api.Server) map[string]string {
		t.Helper()
		tags := map[string]string{}
		for _, p := range paths {
			c1, h1, b1 := serveFull(t, remote.Handler(), p)
			c2, _, b2 := serveFull(t, local.Handler(), p)
			if c1 != c2 || !bytes.Equal(withoutVersion(b1), withoutVersion(b2)) {
				t.Fatalf("%s: %s: served %d (%d bytes), local %d (%d bytes): %.300s", step, p, c1, len(b1), c2, len(b2), b1)
			}
			tags[p] = h1.Get("ETag")
		}
		return tags
	}
	before := compare("as uploaded", localServer(t, "graph", filepath.Join(fixtures, "graph.zarrvectors")))
	if changed, err := h.Refresh(ctx); changed || err != nil {
		t.Fatalf("Refresh of an unchanged store: changed=%v err=%v", changed, err)
	}
	cached := ch.Stats().Items
	if cached == 0 {
		t.Fatal("nothing was cached, so the test proves nothing")
	}

	// One chunk rewritten in place: its rows reversed, same size.
	sc := copyStore(t, "graph")
	edit(hostileChunk, reversedRows).apply(t, sc.dir)
	upload(t, w, sc.dir)
	settled(t, w)
	if changed, err := h.Refresh(ctx); !changed || err != nil {
		t.Fatalf("Refresh after a rewrite: changed=%v err=%v", changed, err)
	}
	after := compare("one chunk rewritten", localServer(t, "graph", sc.dir))
	if after[paths[1]] == before[paths[1]] {
		t.Fatal("ETag unchanged after the store's objects changed")
	}

	// The whole store replaced by another (the smallest fixture: an
	// upload costs a write a file).
	upload(t, w, filepath.Join(fixtures, "skeleton.zarrvectors"))
	settled(t, w)
	if changed, err := h.Refresh(ctx); !changed || err != nil {
		t.Fatalf("Refresh after a replacement: changed=%v err=%v", changed, err)
	}
	compare("store replaced", localServer(t, "graph", filepath.Join(fixtures, "skeleton.zarrvectors")))

	// Replaced by something that does not open: the check says why, and
	// the version that works keeps answering (from its cache, and the
	// objects it still has); then the next refresh opens the fixed store.
	sc.restore(t, hostileChunk)
	edit("zarr.json", replace(`"0.7.0"`, `"1.0.0"`)).apply(t, sc.dir)
	upload(t, w, sc.dir)
	settled(t, w)
	if changed, err := h.Refresh(ctx); changed || !errors.Is(err, zvf.ErrUnsupported) {
		t.Fatalf("Refresh to a broken store: changed=%v err=%v, want the open's error and the old version kept", changed, err)
	}
	compare("broken replacement, old version kept", localServer(t, "graph", filepath.Join(fixtures, "skeleton.zarrvectors")))
	code, _, body := serveFull(t, remote.Handler(), "/api/v1/stores")
	var cat struct {
		Stores []struct {
			Name, Status string
			Problem      *api.Problem
		}
	}
	if err := json.Unmarshal(body, &cat); err != nil || code != 200 || len(cat.Stores) != 1 || cat.Stores[0].Status != "ok" {
		t.Fatalf("catalog while a broken replacement does not open: %d %s", code, body)
	}
	upload(t, w, filepath.Join(fixtures, "graph.zarrvectors"))
	settled(t, w)
	if err := remote.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	// The same bytes written again are a new version (their objects were
	// rewritten), and their ETags are new: a cached copy of the first
	// upload is never taken for one of this.
	got := compare("fixed", localServer(t, "graph", filepath.Join(fixtures, "graph.zarrvectors")))
	if got[paths[1]] == before[paths[1]] {
		t.Fatalf("ETag of a rewritten store equals the first upload's")
	}
}

// settleTime is the quiet time the refresh tests ask of a changed store.
const settleTime = 5 * time.Millisecond

// settled waits until st's clock has moved settleTime past now: a store
// written just before is then quiet enough for its new version to open.
// It waits for a clock (the file system's is coarse), not for a goroutine.
func settled(t *testing.T, st storage.Store) {
	t.Helper()
	mark := st.Now().Add(settleTime)
	for deadline := time.Now().Add(5 * time.Second); !st.Now().After(mark); {
		if time.Now().After(deadline) {
			t.Fatal("the store's clock does not advance")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestReplacedObjectsRefresh(t *testing.T) {
	t.Parallel()
	checkReplacedObjects(t, "mem://replaced")
}

func TestReplacedObjectsRefreshLocal(t *testing.T) {
	t.Parallel()
	checkReplacedObjects(t, t.TempDir())
}

// TestS3MatchesLocal serves reference stores from a real S3-compatible
// server (MinIO on loopback, started by .ci/run) through
// s3://…?endpoint=…&use_path_style=true and checks every answer equals
// the local-disk answer, also after the objects are replaced. Set ZVFSERVE_S3_ENDPOINT (and AWS_ACCESS_KEY_ID /
// AWS_SECRET_ACCESS_KEY) to run it; CI sets ZVFSERVE_REQUIRE_S3=1.
func TestS3MatchesLocal(t *testing.T) {
	t.Parallel()
	endpoint := s3Endpoint(t)
	ctx := context.Background()
	const bucket = "zvf-fixtures"
	createBucket(t, endpoint, bucket)
	names := []string{"graph", "points_pyramid", "mesh", "points_bins_blosc"}
	q := "?endpoint=" + url.QueryEscape(endpoint) + "&use_path_style=true&region=us-east-1"
	var s3Stores, localStores []*zvf.Store
	for _, n := range names {
		src := filepath.Join(fixtures, n+".zarrvectors")
		up, err := s3Drivers().Open(ctx, "s3://"+bucket+"/"+n+".zarrvectors"+q, localfs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		uploadTree(t, up, src)
		s, err := zvf.Open(ctx, up, zvf.Options{Name: n, Cache: cache.New(64 << 20)})
		if err != nil {
			t.Fatalf("open %s from S3: %v", n, err)
		}
		t.Cleanup(func() { _ = up.Close() })
		s3Stores = append(s3Stores, s)
	}
	localStores = openStores(t, names...)
	_, remote := newServer(t, api.Options{Stores: s3Stores})
	_, local := newServer(t, api.Options{Stores: localStores})
	paths := []string{
		"/api/v1/stores",
		"/api/v1/stores/graph",
		"/api/v1/stores/graph/bbox?min=0,0,0&max=1000,1000,1000",
		"/api/v1/stores/graph/objects/1",
		"/api/v1/stores/points_pyramid/bbox?min=100,100,100&max=700,700,700&attributes=*&f=bin",
		"/api/v1/stores/points_pyramid/bbox?min=0,0,0&max=1000,1000,1000&level=1",
		"/api/v1/stores/points_pyramid/objects/3/manifest?level=1",
		"/api/v1/stores/points_pyramid/groups/1",
		"/api/v1/stores/mesh/bbox?min=150,150,150&max=250,250,250",
		"/api/v1/stores/points_bins_blosc/bbox?min=0,0,0&max=500,500,500&f=ndjson",
		"/api/v1/stores/graph/levels/0/chunks",
	}
	for _, p := range paths {
		r1, b1 := apitest.Get(t, remote, p)
		r2, b2 := apitest.Get(t, local, p)
		if r1.StatusCode != http.StatusOK || r2.StatusCode != http.StatusOK {
			t.Fatalf("%s: S3 %d, local %d: %s", p, r1.StatusCode, r2.StatusCode, b1)
		}
		// Descriptors' URLs are absolute, on each server's own address.
		b1 = bytes.ReplaceAll(b1, []byte(remote.URL), []byte(local.URL))
		if !bytes.Equal(b1, b2) {
			t.Fatalf("%s: S3 and local answers differ (%d vs %d bytes)", p, len(b1), len(b2))
		}
	}
	t.Logf("%d routes over %d stores: S3 answers equal local-disk answers", len(paths), len(names))
	// Objects replaced in the bucket: new ETags, so a refresh reopens the
	// store with fresh caches and the answers follow.
	t.Run("replaced objects", func(t *testing.T) { checkReplacedObjects(t, "s3://"+bucket+"/replaced.zarrvectors"+q) })
	t.Run("requests per check", func(t *testing.T) { checkRequestsPerCheck(t, endpoint, bucket, names) })
}

// requestCounter counts the HTTP requests an S3 client sends, by method.
type requestCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *requestCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n[r.Method]++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (c *requestCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// checkRequestsPerCheck: against a real S3 server, opening a store sends
// no whole-store listing and a revalidation sends one LIST and a HEAD per
// metadata object (root and each level), however many objects the store
// has. Before, both listed every object: on S3 a LIST per thousand objects
// (1,000 a minute for a 1M-object store, per replica).
func checkRequestsPerCheck(t *testing.T, endpoint, bucket string, names []string) {
	ctx := context.Background()
	rc := &requestCounter{n: map[string]int{}}
	b, err := s3blob.OpenBucket(ctx, s3Client(endpoint, &http.Client{Transport: rc}), bucket, nil)
	if err != nil {
		t.Fatal(err)
	}
	all := s3store.Wrap(b)
	defer all.Close()
	for _, n := range names {
		objects := 0
		if err := storage.Sub(all, n+".zarrvectors").Walk(ctx, "", func(string, storage.Attrs) error { objects++; return nil }); err != nil {
			t.Fatal(err)
		}
		rc.take()
		h, err := zvf.OpenHandle(ctx, storage.Sub(all, n+".zarrvectors"), zvf.Options{Name: n}, zvf.Watch{Enabled: true})
		if err != nil {
			t.Fatal(err)
		}
		st, err := h.Current()
		if err != nil {
			t.Fatal(err)
		}
		atOpen := rc.take()
		const checks = 5
		for range checks {
			if changed, err := h.Refresh(ctx); changed || err != nil {
				t.Fatalf("%s: Refresh of an unchanged store: %v %v", n, changed, err)
			}
		}
		per := rc.take()
		levels := len(st.Levels())
		if per["GET"] != checks || per["HEAD"] != checks*(1+levels) || len(per) != 2 {
			t.Errorf("%s (%d objects, %d levels): %v requests in %d checks, want %d LIST and %d HEAD", n, objects, levels, per, checks, checks, checks*(1+levels))
		}
		t.Logf("%s: %d objects; opening sent %v; each check %d LIST + %d HEAD", n, objects, atOpen, per["GET"]/checks, per["HEAD"]/checks)
	}
}
