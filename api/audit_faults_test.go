package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/storage/faultstore"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestDescriptorUnderBackendFault: the store descriptor lists a ready
// Neuroglancer state with the objects it found in the object index. When
// the backend fails while those are read, the answer must not be a 200
// with the objects left out under the same strong ETag as the whole
// answer (a cache or client keeps the partial one, and a 304 later
// confirms it): it fails visibly (502), is whole, or goes out without
// the objects and without an ETag, not to be stored.
func TestDescriptorUnderBackendFault(t *testing.T) {
	t.Parallel()
	const path = "/api/v1/stores/graph"
	_, h := faultyServer(t, api.Options{})
	code, hdr0, want := serveFull(t, h, path)
	if code != 200 {
		t.Fatalf("healthy descriptor: %d %.300s", code, want)
	}
	var d struct {
		Neuroglancer struct {
			State struct {
				Layers []struct {
					Segments []string `json:"segments"`
				} `json:"layers"`
			} `json:"state"`
		} `json:"neuroglancer"`
	}
	if err := json.Unmarshal(want, &d); err != nil {
		t.Fatal(err)
	}
	segs := 0
	for _, l := range d.Neuroglancer.State.Layers {
		segs += len(l.Segments)
	}
	if segs == 0 {
		t.Fatal("the healthy descriptor lists no segments, so the test proves nothing")
	}
	// A second server: the first cached the object index.
	fs, h := faultyServer(t, api.Options{})
	fs.Add(&faultstore.Rule{Op: "get", Key: "object_index", Fault: faultstore.Fault{Err: errors.Join(storage.ErrUnavailable, faultstore.ErrInjected)}})
	code, hdr, body := serveFull(t, h, path)
	switch {
	case code == 200 && !bytes.Equal(body, want) && (hdr.Get("ETag") != "" || hdr.Get("Cache-Control") != "no-store"):
		t.Fatalf("a 200 descriptor that differs from the healthy one, to be kept (ETag %q, healthy %s; Cache-Control %q):\n%s\nwant\n%s",
			hdr.Get("ETag"), hdr0.Get("ETag"), hdr.Get("Cache-Control"), body, want)
	case code == 200 && bytes.Contains(body, []byte(`"segments":[`)): // a layer's, not the source named segments
		t.Fatalf("a descriptor under the fault lists segments it could not read: %s", body)
	case code != 200 && code != http.StatusBadGateway:
		t.Fatalf("descriptor under a backend fault: %d %.300s", code, body)
	}
	// Nor does the healthy answer's ETag get a 304 while the objects
	// cannot be read.
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Header.Set("If-None-Match", hdr0.Get("ETag"))
	if code, _, _ := serveRequest(t, h, req); code == http.StatusNotModified {
		t.Fatal("304 for the healthy descriptor's ETag while its objects cannot be read")
	}
	if fs.Faults.Load() == 0 {
		t.Fatal("the fault never fired")
	}
}

// TestSharedLoadDoesNotOutliveItsRequest: requests for the same chunk
// share one cache load, which runs on the goroutine of the request that
// started it. With the backend hung, that request must still end by its
// own deadline (504) when later requests keep joining the load; before,
// it ended only when the last of them left, long after its deadline.
func TestSharedLoadDoesNotOutliveItsRequest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const timeout = time.Second
		fs, h := faultyServer(t, api.Options{RequestTimeout: timeout})
		fs.Add(hang())
		start := time.Now()
		type result struct {
			code int
			took time.Duration
		}
		results := make([]chan result, 5)
		for i := range results {
			results[i] = make(chan result, 1)
			go func() {
				code, _, _ := serveFull(t, h, graphBox)
				results[i] <- result{code, time.Since(start)}
			}()
			// Each next request joins the load before the one before it
			// gives up.
			time.Sleep(600 * time.Millisecond)
		}
		for i, ch := range results {
			r := <-ch
			began := time.Duration(i) * 600 * time.Millisecond
			if r.code != http.StatusGatewayTimeout || r.took > began+timeout+100*time.Millisecond {
				t.Errorf("request %d (began at %v, deadline %v): %d after %v", i, began, began+timeout, r.code, r.took)
			}
		}
		noReadsInFlight(t, fs)
	})
}

// TestHungStoreLeavesRoomForOthers: requests to a store whose backend
// hangs wait on storage until their deadline, each holding a work slot.
// They must not take every slot: a request to another, healthy store is
// answered meanwhile, with one store hanging or several. Before, a
// viewer's tiles from one hung bucket (64 requests for 30 s each at the
// defaults) made every store 503.
func TestHungStoreLeavesRoomForOthers(t *testing.T) {
	t.Parallel()
	for _, hungStores := range []int{1, 2, 3} {
		t.Run(fmt.Sprint(hungStores), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				open := func(name string) (*faultstore.Store, *zvf.Store) {
					st, err := blobstore.Open(ctx, filepath.Join(fixtures, "graph.zarrvectors"))
					if err != nil {
						t.Fatal(err)
					}
					fs := faultstore.New(st, nil)
					t.Cleanup(func() { _ = fs.Close() })
					s, err := zvf.Open(ctx, fs, zvf.Options{Name: name, Cache: cache.New(64 << 20)})
					if err != nil {
						t.Fatal(err)
					}
					return fs, s
				}
				var hung []*faultstore.Store
				var stores []*zvf.Store
				for i := range hungStores {
					fs, s := open(fmt.Sprint("hung", i))
					fs.Add(hang())
					hung, stores = append(hung, fs), append(stores, s)
				}
				_, ok := open("ok")
				const slots = 16
				srv := apitest.New(t, api.Options{Stores: append(stores, ok), MaxConcurrent: slots, QueueWait: 50 * time.Millisecond, RequestTimeout: 2 * time.Second})
				codes := make(chan int, 2*slots*hungStores)
				for i := range hungStores {
					for range 2 * slots { // a viewer asking for the hung store's tiles
						go func() {
							code, _, _ := serveFull(t, srv.Handler(), strings.Replace(graphBox, "/graph/", fmt.Sprintf("/hung%d/", i), 1))
							codes <- code
						}()
					}
				}
				synctest.Wait()
				for _, fs := range hung {
					if fs.InFlight.Load() == 0 {
						t.Fatal("no request reached a hung backend")
					}
				}
				code, _, body := serveFull(t, srv.Handler(), strings.Replace(graphBox, "/graph/", "/ok/", 1))
				if code != 200 {
					t.Errorf("the healthy store while %d others hang: %d %.200s", hungStores, code, body)
				}
				for range 2 * slots * hungStores {
					if c := <-codes; c != http.StatusGatewayTimeout && c != http.StatusServiceUnavailable {
						t.Errorf("a request to a hung store: %d", c)
					}
				}
				for _, fs := range hung {
					noReadsInFlight(t, fs)
				}
			})
		})
	}
}

// TestDataOnlyChangeKeepsNoETag: a chunk rewritten in place (metadata
// untouched) changes what a chunk route answers. With Watch.Walk (what
// --revalidate-walk sets, for owners who rewrite data in place):
//   - a server that opens the store after the change (a restart, a replica
//     started later) must not answer the old answer's ETag with a 304: that
//     ETag named other bytes;
//   - a replica that was serving before the change and reopened after it
//     names the new bytes as the later one does.
//
// Before, a first open named its version by the metadata alone, so both
// failed. Without Walk it still does (no walk at start, by design: see
// TestRevalidationCost; docs/operations.md says so).
func TestDataOnlyChangeKeepsNoETag(t *testing.T) {
	t.Parallel()
	const chunkPath = "/api/v1/stores/g/levels/0/chunks/3.4.2"
	sc := copyStore(t, "graph")
	base := zvftest.Store(t, sc.dir)
	walk := zvf.Watch{Enabled: true, Settle: settleTime, Walk: true}
	open := func() (*zvf.Handle, *api.Server) {
		h, srv := handleServer(t, base, zvf.Options{Name: "g", Cache: cache.New(64 << 20)}, walk, api.Options{})
		if _, err := h.Current(); err != nil {
			t.Fatal(err)
		}
		return h, srv
	}
	early, before := open()
	code, hdr, body0 := serveFull(t, before.Handler(), chunkPath)
	etag0 := hdr.Get("ETag")
	if code != 200 || etag0 == "" {
		t.Fatalf("before the change: %d %q", code, etag0)
	}
	settled(t, base)
	sc.change(t, edit(hostileChunk, reversedRows))
	settled(t, base)

	// A server started after the change.
	_, after := open()
	code, hdr, body1 := serveFull(t, after.Handler(), chunkPath)
	if code != 200 || bytes.Equal(body0, body1) {
		t.Fatalf("after the change: %d, same body %v", code, bytes.Equal(body0, body1))
	}
	etag1 := hdr.Get("ETag")
	if etag1 == etag0 {
		t.Errorf("the new bytes are named %s, as the old ones were", etag0)
	}
	req, err := http.NewRequest(http.MethodGet, chunkPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("If-None-Match", etag0)
	if code, _, body := serveRequest(t, after.Handler(), req); code != http.StatusOK || !bytes.Equal(body, body1) {
		t.Errorf("the old answer's ETag %s: %d (want 200 and the new bytes)", etag0, code)
	}

	// The server that was serving sees the change by its walk, reopens,
	// and names the new version as the later server does.
	deadline := time.Now().Add(10 * time.Second)
	for {
		changed, err := early.RefreshDeep(context.Background())
		if err == nil && changed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the walk did not reopen the changed store: %v", err)
		}
		settled(t, base)
	}
	code, hdr, body := serveFull(t, before.Handler(), chunkPath)
	if code != 200 || !bytes.Equal(body, body1) {
		t.Fatalf("the early server after its walk: %d, new bytes %v", code, bytes.Equal(body, body1))
	}
	if got := hdr.Get("ETag"); got != etag1 {
		t.Errorf("replicas name the same bytes differently: %s (reopened) and %s (opened after)", got, etag1)
	}
}

// TestNoNotModifiedForAKnownChange: once a read has found a chunk
// rewritten (the server answered 503 store-changing for it), the server
// knows the version it serves is out of date. A request for the same
// answer that sends the old answer's ETag must not then be told its copy
// is current (304): it gets the new version's answer, or 503 while the
// store settles. Before, the 304 went out, without a read, until some
// other request or the next check opened the new version.
func TestNoNotModifiedForAKnownChange(t *testing.T) {
	t.Parallel()
	const chunkPath = "/api/v1/stores/g/levels/0/chunks/3.4.2"
	sc := copyStore(t, "graph")
	base := zvftest.Store(t, sc.dir)
	// No cache: every answer reads its chunk.
	hs, srv := watchedServer(t, map[string]storage.Store{"g": base}, nil, api.Options{})
	if _, err := hs["g"].Current(); err != nil {
		t.Fatal(err)
	}
	code, hdr, body0 := serveFull(t, srv.Handler(), chunkPath)
	etag := hdr.Get("ETag")
	if code != 200 || etag == "" {
		t.Fatalf("before the change: %d %q", code, etag)
	}
	settled(t, base)
	sc.change(t, edit(hostileChunk, reversedRows))
	// The change is found by a read (the metadata did not move).
	code, _, body := serveFull(t, srv.Handler(), chunkPath)
	if code == 200 && bytes.Equal(body, body0) {
		t.Fatal("the rewritten chunk was answered as before: the change was not seen")
	}
	settled(t, base)
	req, err := http.NewRequest(http.MethodGet, chunkPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("If-None-Match", etag)
	code, _, body = serveRequest(t, srv.Handler(), req)
	if code == http.StatusNotModified {
		t.Fatalf("304 for %s after the server found the chunk rewritten", etag)
	}
	if code != 200 && code != http.StatusServiceUnavailable {
		t.Fatalf("conditional request after the change: %d %.300s", code, body)
	}
	if code == 200 && bytes.Equal(body, body0) {
		t.Fatal("the old answer after the change")
	}
}

// panickyStore panics in every listing and stat once armed: a backend
// driver (or a parser below the check) that panics on what it is handed.
type panickyStore struct {
	storage.Store
	armed  *atomic.Bool
	panics *atomic.Int64
}

func (p panickyStore) Stat(ctx context.Context, key string) (storage.Attrs, error) {
	if p.armed.Load() {
		p.panics.Add(1)
		panic("injected: a driver that panics")
	}
	return p.Store.Stat(ctx, key)
}

func (p panickyStore) List(ctx context.Context, prefix string) (storage.Listing, error) {
	if p.armed.Load() {
		p.panics.Add(1)
		panic("injected: a driver that panics")
	}
	return p.Store.List(ctx, prefix)
}

// TestCheckPanicIsNotACrash: a panic in a store's background check (no
// request below it, so no recoverer) fails that check, logged, and the
// server goes on serving. Before, it ended the process.
func TestCheckPanicIsNotACrash(t *testing.T) {
	t.Parallel()
	st, err := blobstore.Open(context.Background(), filepath.Join(fixtures, "graph.zarrvectors"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	armed, panics := new(atomic.Bool), new(atomic.Int64)
	_, srv := watched(t, "g", panickyStore{Store: st, armed: armed, panics: panics})
	armed.Store(true)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Revalidate(ctx, 10*time.Millisecond, time.Minute, false)
	}()
	waitFor(t, "two checks that panic", func() bool { return panics.Load() >= 2 })
	stop()
	<-done
	armed.Store(false)
	if code, _, body := serveFull(t, srv.Handler(), "/api/v1/stores/g"); code != 200 {
		t.Fatalf("after the checks: %d %.200s", code, body)
	}
}

// serveMaybeCut is serveFull for an answer that may be cut after it
// started (the handler aborts with http.ErrAbortHandler): cut says so.
func serveMaybeCut(t *testing.T, h http.Handler, path string) (code int, body []byte, cut bool) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	func() {
		defer func() {
			if v := recover(); v != nil {
				if v != http.ErrAbortHandler {
					t.Fatalf("%s: handler panicked (%v)", path, v)
				}
				cut = true
			}
		}()
		h.ServeHTTP(rec, req)
	}()
	return rec.Code, rec.Body.Bytes(), cut
}

// TestCutAnswerReportsTheChange: an answer that has started streaming
// when it meets a chunk rewritten in place (metadata untouched) can only
// be cut. The server must still learn of the change from it, so that the
// store's new version opens once it settles and the same request is
// answered whole. Before, the cut answer told the handle nothing: the
// metadata check finds no change, so every such answer was cut, for ever
// (until a request met the change before streaming, or a walk).
func TestCutAnswerReportsTheChange(t *testing.T) {
	t.Parallel()
	const box = "/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9"
	dir := zvftest.CopyTree(t, filepath.Join(fixtures, "points_bins.zarrvectors"))
	base := zvftest.Store(t, dir)
	// No cache: each answer reads its chunks.
	hs, srv := watchedServer(t, map[string]storage.Store{"s": base}, nil, api.Options{})
	if _, err := hs["s"].Current(); err != nil {
		t.Fatal(err)
	}
	code, want, cut := serveMaybeCut(t, srv.Handler(), box)
	if code != 200 || cut || len(want) < 512<<10 {
		t.Fatalf("before the change: %d, cut %v, %d bytes (the test needs an answer that streams)", code, cut, len(want))
	}
	settled(t, base)
	// The last chunk in key order, rewritten with the same bytes: read
	// only once the answer streams.
	last := filepath.Join(dir, "0", "vertices", "3.3.3", "c", "0")
	b, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(last, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, cut = serveMaybeCut(t, srv.Handler(), box)
	if !cut && code != http.StatusServiceUnavailable {
		t.Fatalf("the answer that met the change: %d, not cut", code)
	}
	settled(t, base)
	if err := srv.Refresh(context.Background()); err != nil { // a --revalidate check
		t.Fatal(err)
	}
	code, body, cut := serveMaybeCut(t, srv.Handler(), box)
	if cut || code != 200 || !bytes.Equal(body, want) {
		t.Fatalf("after the store settled and was checked: %d, cut %v, %d bytes (want %d)", code, cut, len(body), len(want))
	}
}
