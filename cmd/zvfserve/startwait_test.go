package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestServeStartWaitBoundsHungListings: three STORE arguments whose backend
// never answers. serve says, while it waits, which argument it waits on and
// for what (the listing that tells a store from a folder of stores) and
// for how long at most; it listens once --start-wait has passed in all,
// not once per argument; and each is then served as one store that is
// still opening. Before, there was no flag (10 s, fixed), the log said
// nothing until each wait had ended, and the arguments were waited on one
// after another: three hung ones kept serve from listening for 30 s, past
// the manifests' liveness probe's patience.
func TestServeStartWaitBoundsHungListings(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var stalls []*stallingStore
	wrap := func(st storage.Store) storage.Store {
		s := &stallingStore{Store: st, hang: make(chan struct{}), entered: make(chan struct{})}
		mu.Lock()
		stalls = append(stalls, s)
		mu.Unlock()
		return s
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range stalls {
			close(s.hang)
		}
	})
	args := []string{"--start-wait", "1500ms", "--revalidate", "1h"}
	for _, name := range []string{"a", "b", "c"} {
		args = append(args, name+"="+zvftest.CopyTree(t, graphStore))
	}
	start := time.Now()
	s := startServeWith(t, serveHooks{wrapArg: wrap}, args...)
	s.exitsClean(t)
	took := time.Since(start)
	if took > 4*time.Second {
		t.Errorf("serve listened %v after it started; --start-wait is 1.5s in all", took)
	}
	if took < 1400*time.Millisecond {
		t.Errorf("serve listened after %v, before --start-wait had passed", took)
	}
	log := s.errs.String()
	for _, name := range []string{"a", "b", "c"} {
		if !strings.Contains(log, `waiting for the backend to answer the listing that tells a store from a folder of stores" arg="`+name+`=`) {
			t.Errorf("the log does not say serve waits on %s's listing: %s", name, log)
		}
	}
	if !strings.Contains(log, "up_to=1.5s") || !strings.Contains(log, "--start-wait") {
		t.Errorf("the log does not say how long serve waits at most, nor which flag sets it: %s", log)
	}
	if code, body, _ := httpGet(t, s.base+"/readyz"); code != 503 || !strings.Contains(body, "3 of 3 stores not serving") {
		t.Errorf("/readyz: %d %q", code, body)
	}
}

// TestServeStartWaitIsChecked: --start-wait must be positive.
func TestServeStartWaitIsChecked(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var out, errs bytes.Buffer
	if code := run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--start-wait", "0", graphStore}, &out, &errs); code != 2 || !strings.Contains(errs.String(), "--start-wait 0") {
		t.Fatalf("--start-wait 0: exit %d (want 2, naming it): %s", code, errs.String())
	}
}
