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
			src := filepath.Join(fixtures, tc.fixture+".zarrvectors")
			if strings.HasSuffix(tc.fixture, "_v09") {
				src = filepath.Join(fixtures09, tc.fixture+".zarrvectors")
			}
			w, err := blobstore.Open(ctx, "mem://")
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			uploadTree(t, w, src)
			settled(t, w)
			ch := cache.New(64 << 20)
			// The clock that spaces checks: a check a second after the last.
			var skew atomic.Int64
			now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
			h, err := zvf.OpenHandle(ctx, w, zvf.Options{Name: "s", Cache: ch}, zvf.Watch{Enabled: true, Settle: settleTime, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			srv, err := api.New(api.Options{Handles: []*zvf.Handle{h}, Cache: ch})
			if err != nil {
				t.Fatal(err)
			}
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
			dir := zvftest.CopyTree(t, src)
			for _, p := range tc.deleted {
				if err := os.RemoveAll(filepath.Join(dir, filepath.FromSlash(p))); err != nil {
					t.Fatal(err)
				}
			}
			uploadTree(t, w, dir)
			settled(t, w)
			skew.Add(int64(time.Second))
			wantCode, _, want := serveFull(t, localServer(t, "s", dir).Handler(), tc.path)
			code, _, body = serveFull(t, srv.Handler(), tc.path)
			for i := 0; code == http.StatusServiceUnavailable && i < 5; i++ {
				wantProblem(t, "while the new version settles", code, body, "store-changing")
				settled(t, w)
				code, _, body = serveFull(t, srv.Handler(), tc.path)
			}
			if code != wantCode || (code == 200 && !bytes.Equal(body, want)) {
				t.Fatalf("after the sync: %d %.300s\nwant %d %.300s", code, body, wantCode, want)
			}
		})
	}
}
