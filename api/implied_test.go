package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// impliedCases delete objects a store version has (its metadata or the
// listing taken when it opened says so) and ask for an answer that reads
// them. Before, each was read as "this array does not exist": answers of
// 200 under the version's strong ETag with data missing (faces dropped,
// rows given another object's id, attributes of dropped objects) or 404.
var impliedCases = []struct {
	name, fixture string
	deleted       []string // folders (object prefixes) deleted
	path          string
}{
	{"fragment index", "graph", []string{"0/vertex_fragments/3.4.2"}, "/api/v1/stores/s/objects/0"},
	{"fragment index, bbox owners", "graph", []string{"0/vertex_fragments/3.4.2"}, "/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9"},
	{"cross-chunk links", "mesh", []string{"0/cross_chunk_links/0/data"}, "/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9"},
	{"intra-chunk links", "mesh", []string{"0/links/0/1.1.1"}, "/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9"},
	{"vertex attribute", "points_pyramid", []string{"0/vertex_attributes/intensity/0.1.1"}, "/api/v1/stores/s/levels/0/chunks/0.1.1?attributes=*"},
	{"present mask", "points_pyramid", []string{"1/object_attributes/volume/present_mask"}, "/api/v1/stores/s/objects/0?level=1&attributes=*"},
	{"vertex chunk", "graph", []string{"0/vertices/3.4.2"}, "/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9"},
	{"object manifests", "polylines", []string{"0/object_index/manifests"}, "/api/v1/stores/s/objects/3"},
	{"groups", "points_pyramid", []string{"0/groups/data"}, "/api/v1/stores/s/groups/0"},
	{"0.9 listed cell", "graph_v09", []string{"0/vertices/c/3/4/5"}, "/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9"},
	{"0.9 intra link cell", "graph_v09", []string{"0/links/0/0.0.0/c/3/4/5"}, "/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9"},
}

// deleteUnder deletes every object of w under each of prefixes (a key, or
// a folder of keys).
func deleteUnder(t *testing.T, w storage.Writer, prefixes []string) {
	t.Helper()
	ctx := context.Background()
	var keys []string
	if err := w.Walk(ctx, "", func(k string, _ storage.Attrs) error {
		for _, p := range prefixes {
			if k == p || strings.HasPrefix(k, p+"/") {
				keys = append(keys, k)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatalf("nothing under %v to delete", prefixes)
	}
	for _, k := range keys {
		if err := w.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
}

// wantProblem fails t unless a answered the problem kind (type suffix).
func wantProblem(t *testing.T, what string, code int, body []byte, kinds ...string) {
	t.Helper()
	var p api.Problem
	if json.Unmarshal(body, &p) == nil && p.Status == code {
		for _, k := range kinds {
			if strings.HasSuffix(p.Type, "/"+k) {
				return
			}
		}
	}
	t.Fatalf("%s: %d %.300s, want a problem of kind %v", what, code, body, kinds)
}

// watchedCached serves st as store "s" through a watching handle (now is
// its clock, nil for the wall's), with the cache the answers read through.
func watchedCached(t *testing.T, st storage.Store, now func() time.Time) (*api.Server, *cache.Cache) {
	t.Helper()
	ch := cache.New(64 << 20)
	h, err := zvf.OpenHandle(context.Background(), st, zvf.Options{Name: "s", Cache: ch}, zvf.Watch{Enabled: true, Settle: settleTime, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Options{Handles: []*zvf.Handle{h}, Cache: ch})
	if err != nil {
		t.Fatal(err)
	}
	return srv, ch
}

// serveSettling serves path as a client that honours 503 store-changing:
// while the answer is one, it waits for st to settle and asks again (five
// times at most). what names the moment in a failure.
func serveSettling(t *testing.T, h http.Handler, st storage.Store, path, what string) (int, http.Header, []byte) {
	t.Helper()
	code, hdr, body := serveFull(t, h, path)
	for i := 0; code == http.StatusServiceUnavailable && i < 5; i++ {
		wantProblem(t, what, code, body, "store-changing")
		settled(t, st)
		code, hdr, body = serveFull(t, h, path)
	}
	return code, hdr, body
}

// TestDeletedObjectIsNeverAbsent: on an object store (mem://, no folders
// to date a delete by), an object the served version has and storage no
// longer holds fails the answer visibly — 422 while the store's metadata
// stands (a store broken there), 503 store-changing and then the new
// version's answer once the metadata moved too (the delete phase of a
// sync) — and is never read as absent.
func TestDeletedObjectIsNeverAbsent(t *testing.T) {
	t.Parallel()
	for _, tc := range impliedCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			src := fixtureDir(tc.fixture)
			w, err := blobstore.Open(ctx, "mem://")
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			uploadTree(t, w, src)
			settled(t, w)
			// The clock that spaces checks: a check a second after the last.
			var skew atomic.Int64
			srv, ch := watchedCached(t, w, func() time.Time { return time.Now().Add(time.Duration(skew.Load())) })
			if code, _, body := serveFull(t, srv.Handler(), tc.path); code != 200 {
				t.Fatalf("before the delete: %d %.300s", code, body)
			}
			ch.Purge() // the answer must read the deleted objects again
			deleteUnder(t, w, tc.deleted)
			code, _, body := serveFull(t, srv.Handler(), tc.path)
			wantProblem(t, "deleted, metadata unchanged", code, body, "corrupt-data")

			// The sync rewrites the rest (the new version lacks the deleted
			// objects): the answer is the new version's, as a server that
			// opened it from scratch gives it.
			uploadTreeWithout(t, w, src, tc.deleted)
			settled(t, w)
			skew.Add(int64(time.Second))
			fresh, err := zvf.Open(ctx, w, zvf.Options{Name: "s", Cache: cache.New(16 << 20)})
			if err != nil {
				t.Fatal(err)
			}
			oracle, err := api.New(api.Options{Stores: []*zvf.Store{fresh}})
			if err != nil {
				t.Fatal(err)
			}
			wantCode, _, want := serveFull(t, oracle.Handler(), tc.path)
			code, _, body = serveSettling(t, srv.Handler(), w, tc.path, "while the new version settles")
			if code != wantCode || (code == 200 && !bytes.Equal(body, want)) {
				t.Fatalf("after the sync: %d %.300s\nwant %d %.300s", code, body, wantCode, want)
			}
		})
	}
}

// TestLocalDeleteIsAChange: the same deletes in a local folder, where a
// folder's times date the delete: a read that meets one after the version
// opened is the store changing (503 store-changing, then the new version,
// which lacks the deleted objects) — including a chunk's data file deleted
// while its zarr.json stays, which Zarr would read as zeros. Before, these
// read as absent (200 with data missing, or the zeros) or as 404.
func TestLocalDeleteIsAChange(t *testing.T) {
	t.Parallel()
	cases := append([]struct {
		name, fixture string
		deleted       []string
		path          string
	}{
		{"chunk data file", "graph", []string{"0/vertices/3.4.2/c/0"}, "/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9"},
		{"link cell data file", "mesh", []string{"0/links/0/1.1.1/c/0"}, "/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9"},
	}, impliedCases...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			src := fixtureDir(tc.fixture)
			dir := zvftest.CopyTree(t, src)
			st, err := blobstore.Open(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			settled(t, st)
			srv, ch := watchedCached(t, st, nil)
			code, hdr, body := serveFull(t, srv.Handler(), tc.path)
			if code != 200 {
				t.Fatalf("before the delete: %d %.300s", code, body)
			}
			etag := hdr.Get("ETag")
			settled(t, st) // the delete comes after the open by the folder's clock
			for _, p := range tc.deleted {
				if err := os.RemoveAll(filepath.Join(dir, filepath.FromSlash(p))); err != nil {
					t.Fatal(err)
				}
			}
			// A server that opens the folder after the delete answers as
			// the new version should.
			wantCode, _, wantBody := serveFull(t, localServer(t, "s", dir).Handler(), tc.path)
			ch.Purge() // the answer must read the deleted objects again
			code, hdr, body = serveSettling(t, srv.Handler(), st, tc.path, "while the change settles")
			if code != wantCode || (code == 200 && !bytes.Equal(body, wantBody)) {
				t.Fatalf("after the delete: %d %.300s\nwant the new version's %d %.300s", code, body, wantCode, wantBody)
			}
			if code == 200 && hdr.Get("ETag") == etag {
				t.Fatalf("after the delete: the new content under the old version's ETag %s", etag)
			}
		})
	}
}

// TestBlueGreenFlip: a store served through a link is flipped to its next
// version and the old folder deleted at once (ln -sfn v2 current && rm -rf
// v1), with no check in between: every request after it answers from v2,
// or 503 store-changing while it opens — never 404 for the objects of the
// deleted folder. Before, 10 of 15 such requests answered 404 until the
// next check.
func TestBlueGreenFlip(t *testing.T) {
	t.Parallel()
	base, v1, v2, cur := linkedVersions(t)
	for _, watch := range []bool{true, false} {
		st, err := blobstore.Open(context.Background(), cur)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		settled(t, st)
		h, err := zvf.OpenHandle(context.Background(), st, zvf.Options{Name: "s", Cache: cache.New(64 << 20)}, zvf.Watch{Enabled: watch, Settle: settleTime})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := api.New(api.Options{Handles: []*zvf.Handle{h}})
		if err != nil {
			t.Fatal(err)
		}
		if watch {
			defer func() { flipped(t, srv, st, v2) }()
		} else {
			defer func() { flippedUnwatched(t, srv) }()
		}
	}
	repoint(t, base, cur)
	if err := os.RemoveAll(v1); err != nil {
		t.Fatal(err)
	}
}

var flipPaths = []string{
	"/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&attributes=*",
	"/api/v1/stores/s/objects/1",
	"/api/v1/stores/s/levels/0/chunks",
}

// flipped checks a watching server after the flip: v2's answers, or 503
// store-changing first.
func flipped(t *testing.T, srv *api.Server, st storage.Store, v2 string) {
	t.Helper()
	local := localServer(t, "s", v2)
	for i := range 15 {
		p := flipPaths[i%len(flipPaths)]
		wantCode, _, want := serveFull(t, local.Handler(), p)
		code, _, body := serveSettling(t, srv.Handler(), st, p, p+" while v2 opens")
		if code != wantCode || !bytes.Equal(body, want) {
			t.Fatalf("request %d after the flip, %s: %d %.300s\nwant v2's %d %.300s", i, p, code, body, wantCode, want)
		}
	}
}

// flippedUnwatched checks a server that takes the store as immutable: what
// it can no longer read is 503 store-changing (a restart serves v2), never
// 404.
func flippedUnwatched(t *testing.T, srv *api.Server) {
	t.Helper()
	for _, p := range flipPaths {
		code, hdr, body := serveFull(t, srv.Handler(), p)
		if code == 200 {
			continue // answered from what the server still held
		}
		wantProblem(t, p+" after the flip, unwatched", code, body, "store-changing")
		if hdr.Get("Retry-After") != "" {
			t.Fatalf("%s: Retry-After %s from a store nothing reopens", p, hdr.Get("Retry-After"))
		}
	}
}
