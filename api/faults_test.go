package api_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/storage/faultstore"
)

// faultyServer serves the graph fixture through a fault-injecting store.
func faultyServer(t *testing.T, o api.Options) (*faultstore.Store, string) {
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
	_, ts := newServer(t, o)
	return fs, ts.URL
}

const graphBox = "/api/v1/stores/graph/bbox?min=390,223,585&max=480,313,675"

func TestBackendUnavailable(t *testing.T) {
	fs, url := faultyServer(t, api.Options{})
	fs.Add(&faultstore.Rule{Op: "get", Key: "vertices", Fault: faultstore.Fault{Err: errors.Join(storage.ErrUnavailable, faultstore.ErrInjected)}})
	resp, err := http.Get(url + graphBox)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("Retry-After") == "" || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("status %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// Once the backend recovers the same request succeeds (errors are not cached).
	fs.Reset()
	resp, err = http.Get(url + graphBox)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("after recovery: %d", resp.StatusCode)
	}
}

func TestSlowStorageTimesOut(t *testing.T) {
	fs, url := faultyServer(t, api.Options{RequestTimeout: 150 * time.Millisecond})
	fs.Add(&faultstore.Rule{Op: "get", Key: "vertices", Fault: faultstore.Fault{Hang: true}})
	start := time.Now()
	resp, err := http.Get(url + graphBox)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout || time.Since(start) > 5*time.Second {
		t.Fatalf("status %d after %v", resp.StatusCode, time.Since(start))
	}
	waitZero(t, fs)
}

func TestClientDisconnectCancelsReads(t *testing.T) {
	fs, url := faultyServer(t, api.Options{})
	fs.Add(&faultstore.Rule{Op: "get", Key: "vertices", Fault: faultstore.Fault{Hang: true}})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+graphBox, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for fs.InFlight.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if fs.InFlight.Load() == 0 {
		t.Fatal("the request never reached storage")
	}
	cancel()
	<-done
	waitZero(t, fs)
	if fs.Canceled.Load() == 0 {
		t.Fatal("the hung backend reads were not cancelled")
	}
}

func TestOverloadGets503(t *testing.T) {
	fs, url := faultyServer(t, api.Options{MaxConcurrent: 1, QueueWait: 50 * time.Millisecond, RequestTimeout: 2 * time.Second})
	fs.Add(&faultstore.Rule{Op: "get", Key: "vertices", Fault: faultstore.Fault{Hang: true}})
	first := make(chan int, 1)
	go func() {
		resp, err := http.Get(url + graphBox)
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	deadline := time.Now().Add(5 * time.Second)
	for fs.InFlight.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	resp, err := http.Get(url + "/api/v1/stores/graph")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("second request: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if code := <-first; code != http.StatusGatewayTimeout {
		t.Fatalf("first request: %d", code)
	}
	waitZero(t, fs)
}

func TestShortReadIsCorruptNotPanic(t *testing.T) {
	fs, url := faultyServer(t, api.Options{})
	fs.Add(&faultstore.Rule{Op: "get", Key: "vertices/4.2.5/c/0", Fault: faultstore.Fault{ShortRead: 7}})
	resp, err := http.Get(url + graphBox)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func waitZero(t *testing.T, fs *faultstore.Store) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for fs.InFlight.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := fs.InFlight.Load(); n != 0 {
		t.Fatalf("%d backend reads still in flight", n)
	}
}
