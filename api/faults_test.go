package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/problem"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/storage/faultstore"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// faultyServer serves the graph fixture through a fault-injecting store,
// in process. The tests that wait run in a synctest bubble: time there is
// fake (a timeout fires as soon as everything waits for it), and
// synctest.Wait returns once every request and read is blocked or done,
// so the counters of the fault store can be read without polling.
func faultyServer(t *testing.T, o api.Options) (*faultstore.Store, http.Handler) {
	t.Helper()
	ctx := context.Background()
	st, err := blobstore.Open(ctx, filepath.Join(fixtures, "graph.zarrvectors"))
	if err != nil {
		t.Fatal(err)
	}
	fs := faultstore.New(st, nil)
	s, err := zvf.Open(ctx, fs, zvf.Options{Name: "graph", Cache: cache.New(64 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fs.Close() })
	o.Stores = []*zvf.Store{s}
	srv := apitest.New(t, o)
	return fs, srv.Handler()
}

const graphBox = "/api/v1/stores/graph/bbox?min=390,223,585&max=480,313,675"

// hang makes every read of a vertex chunk block until its context ends.
func hang() *faultstore.Rule {
	return &faultstore.Rule{Op: "get", Key: "vertices", Fault: faultstore.Fault{Hang: true}}
}

func TestBackendUnavailable(t *testing.T) {
	t.Parallel()
	fs, h := faultyServer(t, api.Options{})
	fs.Add(&faultstore.Rule{Op: "get", Key: "vertices", Fault: faultstore.Fault{Err: errors.Join(storage.ErrUnavailable, faultstore.ErrInjected)}})
	code, hdr, _ := serveFull(t, h, graphBox)
	if code != http.StatusBadGateway || hdr.Get("Retry-After") == "" || hdr.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("status %d Retry-After %q Content-Type %q", code, hdr.Get("Retry-After"), hdr.Get("Content-Type"))
	}
	// Once the backend recovers the same request succeeds (errors are not cached).
	fs.Reset()
	if code, _, _ := serveFull(t, h, graphBox); code != 200 {
		t.Fatalf("after recovery: %d", code)
	}
}

func TestSlowStorageTimesOut(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const timeout = 150 * time.Millisecond
		fs, h := faultyServer(t, api.Options{RequestTimeout: timeout})
		fs.Add(hang())
		start := time.Now()
		code, _, body := serveFull(t, h, graphBox)
		if took := time.Since(start); code != http.StatusGatewayTimeout || took < timeout || took > 5*time.Second {
			t.Fatalf("status %d after %v: %.200s", code, took, body)
		}
		noReadsInFlight(t, fs)
	})
}

func TestClientDisconnectCancelsReads(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fs, h := faultyServer(t, api.Options{})
		fs.Add(hang())
		// What the HTTP server does when the client goes: the request's
		// context ends.
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, graphBox, nil)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			serveRequest(t, h, req)
		}()
		synctest.Wait()
		if fs.InFlight.Load() == 0 {
			t.Fatal("the request never reached storage")
		}
		cancel()
		<-done
		noReadsInFlight(t, fs)
		if fs.Canceled.Load() == 0 {
			t.Fatal("the hung backend reads were not cancelled")
		}
	})
}

func TestOverloadGets503(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fs, h := faultyServer(t, api.Options{MaxConcurrent: 1, QueueWait: 50 * time.Millisecond, RequestTimeout: 2 * time.Second})
		fs.Add(hang())
		first := make(chan int, 1)
		go func() {
			code, _, _ := serveFull(t, h, graphBox)
			first <- code
		}()
		synctest.Wait()
		if fs.InFlight.Load() == 0 {
			t.Fatal("the first request never reached storage")
		}
		code, hdr, _ := serveFull(t, h, "/api/v1/stores/graph")
		if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
			t.Fatalf("second request: %d Retry-After %q", code, hdr.Get("Retry-After"))
		}
		if code := <-first; code != http.StatusGatewayTimeout {
			t.Fatalf("first request: %d", code)
		}
		noReadsInFlight(t, fs)
	})
}

func TestShortReadIsCorruptNotPanic(t *testing.T) {
	t.Parallel()
	fs, h := faultyServer(t, api.Options{})
	fs.Add(&faultstore.Rule{Op: "get", Key: "vertices/4.2.5/c/0", Fault: faultstore.Fault{ShortRead: 7}})
	if code, _, body := serveFull(t, h, graphBox); code != http.StatusUnprocessableEntity {
		t.Fatalf("status %d: %.200s", code, body)
	}
}

// noReadsInFlight fails t if a backend read is still running once
// everything in the bubble has finished or blocked: a read left hanging
// after its request ended.
func noReadsInFlight(t *testing.T, fs *faultstore.Store) {
	t.Helper()
	synctest.Wait()
	if n := fs.InFlight.Load(); n != 0 {
		t.Fatalf("%d backend reads still in flight", n)
	}
}

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
		dir := zvftest.CopyTree(t, filepath.Join(fixtures, "graph.zarrvectors"))
		if err := os.Chmod(filepath.Join(dir, filepath.FromSlash(deniedChunk)), 0); err != nil {
			t.Fatal(err)
		}
		check(t, localServer(t, "graph", dir).Handler())
	})
}
