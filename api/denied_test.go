package api_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/problem"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/storage/faultstore"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// deniedChunk is a chunk graphBox reads.
const deniedChunk = "0/vertices/3.2.5/c/0"

// TestPermissionDeniedNamesChunk: a chunk the server may not read (EACCES
// on a local file, an object store's AccessDenied) is a 502
// storage-denied problem naming store, level, array and chunk, without
// Retry-After (retrying does not help) — not a 500 "internal error".
// Tests run as root here, where file permissions do not apply, so the
// backend's error is injected; the real chmod runs when not root.
func TestPermissionDeniedNamesChunk(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, h http.Handler) {
		t.Helper()
		code, hdr, body := serveFull(t, h, graphBox)
		var p problem.Details
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatalf("%d %s: %v", code, body, err)
		}
		if code != http.StatusBadGateway || p.Kind() != problem.StorageDenied || hdr.Get("Retry-After") != "" ||
			!strings.Contains(p.Detail, `store "graph" level 0 array vertices chunk 3.2.5`) || !strings.Contains(p.Detail, "not permitted") {
			t.Fatalf("%d Retry-After %q: %s", code, hdr.Get("Retry-After"), body)
		}
		if strings.Contains(string(body), "/tmp") || strings.Contains(string(body), "c/0") {
			t.Errorf("the problem shows a path: %s", body)
		}
	}
	t.Run("injected", func(t *testing.T) {
		t.Parallel()
		fst, h := faultyServer(t, api.Options{})
		fst.Add(&faultstore.Rule{Op: "get", Key: deniedChunk, Fault: faultstore.Fault{Err: fs.ErrPermission}})
		check(t, h)
	})
	t.Run("chmod", func(t *testing.T) {
		t.Parallel()
		if os.Geteuid() == 0 {
			t.Skip("running as root: file permissions do not apply (the injected case stands in)")
		}
		ctx := context.Background()
		dir := zvftest.CopyTree(t, filepath.Join(fixtures, "graph.zarrvectors"))
		if err := os.Chmod(filepath.Join(dir, filepath.FromSlash(deniedChunk)), 0); err != nil {
			t.Fatal(err)
		}
		st, err := blobstore.Open(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		s, err := zvf.Open(ctx, st, zvf.Options{Name: "graph", Cache: cache.New(16 << 20)})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := api.New(api.Options{Stores: []*zvf.Store{s}})
		if err != nil {
			t.Fatal(err)
		}
		check(t, srv.Handler())
	})
}
