package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestServeStopsWhileWaitingOnAHungListing: a signal (serve's context
// ending) while start-up waits on a backend that never answers ends serve
// at once and cleanly (exit 0, saying so), whatever --start-wait is left.
// Before, serve ended with the error "context canceled" (exit 1).
func TestServeStopsWhileWaitingOnAHungListing(t *testing.T) {
	t.Parallel()
	stall := &stallingStore{hang: make(chan struct{}), entered: make(chan struct{})}
	t.Cleanup(func() { close(stall.hang) })
	wrap := func(st storage.Store) storage.Store { stall.Store = st; return stall }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errs := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, []string{"--addr", "127.0.0.1:0", "--start-wait", "1m", "h=" + zvftest.CopyTree(t, graphStore)}, out, errs, serveHooks{wrapArg: wrap})
	}()
	select {
	case <-stall.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("serve never asked the backend")
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve: %v\n%s", err, errs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("serve did not return 10 s after its context ended, waiting on the listing: %s", errs.String())
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("serve returned %v after its context ended", took)
	}
	if !strings.Contains(errs.String(), "stopped before listening") {
		t.Errorf("the log does not say serve stopped while starting: %s", errs.String())
	}
	if strings.Contains(errs.String(), "serving it as one store") {
		t.Errorf("a stop was taken for a backend that did not answer: %s", errs.String())
	}
}
