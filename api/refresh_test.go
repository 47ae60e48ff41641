package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
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
	ctx := context.Background()
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
		t.Fatal(err)
	}
	var stale []string
	if err := w.Walk(ctx, "", func(k string, _ storage.Attrs) error {
		if !keep[k] {
			stale = append(stale, k)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, k := range stale {
		if err := w.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
}

// pruneEmptyDirs removes the folders a local rewrite emptied, as a
// pipeline that rewrites a store on disk would (object stores have no
// empty "folders" to leave behind).
func pruneEmptyDirs(t *testing.T, root string) {
	t.Helper()
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
	srv, err := api.New(api.Options{Stores: []*zvf.Store{apitest.Open(t, dir, name, cache.New(16<<20))}})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// checkReplacedObjects serves a store from target (a bucket URL) through
// a watching handle, rewrites it in place three times — with one chunk
// changed (same size), with another store, with a store that does not
// open — and after each Refresh checks every answer equals the local-disk
// answer for the new content, and that ETags changed.
func checkReplacedObjects(t *testing.T, target string) {
	ctx := context.Background()
	w, err := blobstore.Open(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	upload := func(t *testing.T, w storage.Writer, dir string) {
		t.Helper()
		uploadTree(t, w, dir)
		if filepath.IsAbs(target) {
			pruneEmptyDirs(t, target)
		}
	}
	upload(t, w, filepath.Join(fixtures, "graph.zarrvectors"))
	// Object stores stamp whole seconds: a version opened in the second of
	// its last write cannot tell that write from a later one, and waits.
	settled(t, w)
	ch := cache.New(64 << 20)
	h, err := zvf.OpenHandle(ctx, w, zvf.Options{Name: "graph", Cache: ch}, zvf.Watch{Enabled: true, Settle: settleTime})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Current(); err != nil {
		t.Fatal(err)
	}
	remote, err := api.New(api.Options{Handles: []*zvf.Handle{h}, Cache: ch})
	if err != nil {
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
			if c1 != c2 || !bytes.Equal(b1, b2) {
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
	edit(hostileChunk, func(b []byte) []byte {
		out := make([]byte, 0, len(b))
		for i := len(b) - 12; i >= 0; i -= 12 {
			out = append(out, b[i:i+12]...)
		}
		return out
	}).apply(t, sc.dir)
	upload(t, w, sc.dir)
	settled(t, w)
	if changed, err := h.Refresh(ctx); !changed || err != nil {
		t.Fatalf("Refresh after a rewrite: changed=%v err=%v", changed, err)
	}
	after := compare("one chunk rewritten", localServer(t, "graph", sc.dir))
	if after[paths[1]] == before[paths[1]] {
		t.Fatal("ETag unchanged after the store's objects changed")
	}

	// The whole store replaced by another.
	upload(t, w, filepath.Join(fixtures, "points_pyramid.zarrvectors"))
	settled(t, w)
	if changed, err := h.Refresh(ctx); !changed || err != nil {
		t.Fatalf("Refresh after a replacement: changed=%v err=%v", changed, err)
	}
	compare("store replaced", localServer(t, "graph", filepath.Join(fixtures, "points_pyramid.zarrvectors")))

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
	compare("broken replacement, old version kept", localServer(t, "graph", filepath.Join(fixtures, "points_pyramid.zarrvectors")))
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
