package zvf_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/faultstore"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// putAll writes every object of objs in key order.
func putAll(t *testing.T, st storage.Writer, objs map[string][]byte) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(objs)) {
		if err := st.Put(context.Background(), k, objs[k]); err != nil {
			t.Fatal(err)
		}
	}
}

// watchedScene serves the demo's cells store from a store with a clock
// the test moves, behind a fault store, through a handle.
func watchedScene(t *testing.T, w zvf.Watch) (*clockStore, *faultstore.Store, *zvf.Handle, *zvf.Store) {
	t.Helper()
	st := newClockStore(t)
	putAll(t, st, sceneObjects(t, 1, 0.25))
	st.advance(time.Minute)
	fs := faultstore.New(st, nil)
	h, err := zvf.OpenHandle(context.Background(), fs, zvf.Options{Name: "cells", Cache: cache.New(16 << 20)}, w)
	if err != nil {
		t.Fatal(err)
	}
	s, err := h.Current()
	if err != nil {
		t.Fatal(err)
	}
	return st, fs, h, s
}

// TestFailedReopenKeepsServing: a store that changed and whose new
// version fails to open (here the backend fails during the reopen) keeps
// serving the version that works; the next check opens the new one.
// Before, the failed open replaced the working version, and the store
// answered 502 until the next check (forever with revalidation off).
func TestFailedReopenKeepsServing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, fs, h, s1 := watchedScene(t, zvf.Watch{Enabled: true, Settle: 2 * time.Second})
	want, err := wholeBox(ctx, s1)
	if err != nil {
		t.Fatal(err)
	}
	putAll(t, st, sceneObjects(t, 2, 0.25))
	st.advance(time.Minute)
	fs.Add(&faultstore.Rule{Op: "get", Fault: faultstore.Fault{Err: storage.ErrUnavailable}})
	if changed, err := h.Refresh(ctx); changed || !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("a reopen that meets a failing backend: changed=%v err=%v, want false and ErrUnavailable", changed, err)
	}
	if s, err := h.Current(); s != s1 || err != nil {
		t.Fatalf("after a failed reopen the served version is %p (%v), want the one that worked", s, err)
	}
	// Until the next try (Settle later) what needs a changed object waits.
	if _, err := h.Changed(ctx, s1, &storage.ChangedError{}); !errors.Is(err, zvf.ErrChanging) {
		t.Fatalf("Changed right after a failed reopen: %v, want ErrChanging", err)
	}
	fs.Reset()
	st.advance(3 * time.Second)
	if changed, err := h.Refresh(ctx); !changed || err != nil {
		t.Fatalf("the backend back: changed=%v err=%v", changed, err)
	}
	s2, err := h.Current()
	if err != nil || s2 == s1 {
		t.Fatalf("the new version did not open: %v", err)
	}
	if got, err := wholeBox(ctx, s2); err != nil || string(got) == string(want) {
		t.Fatalf("the new version's answer: %v (equal to the old: %v)", err, string(got) == string(want))
	}
}

// TestUnwatchedNeverReopens: a handle that does not watch (--revalidate 0)
// takes its store as immutable: a read that meets a change gets a typed
// error and nothing reopens, however long after. Before, Changed reopened
// the store once it had settled.
func TestUnwatchedNeverReopens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _, h, s1 := watchedScene(t, zvf.Watch{Settle: time.Second})
	for range 2 {
		_, err := h.Changed(ctx, s1, &storage.ChangedError{})
		var ce *zvf.ChangingError
		if !errors.As(err, &ce) || !ce.Unwatched || ce.RetryAfter != 0 {
			t.Fatalf("Changed without watching: %v, want an unwatched ChangingError", err)
		}
		if s, err := h.Current(); s != s1 || err != nil {
			t.Fatalf("the handle reopened a store it does not watch: %p %v", s, err)
		}
		st.advance(time.Hour)
	}
}

// stuckStat is a store whose Stat, once armed, never answers (until its
// caller gives up): a backend that hangs mid-check. entered is closed when
// the first stuck Stat began.
type stuckStat struct {
	storage.Store
	armed   atomic.Bool
	once    sync.Once
	entered chan struct{}
}

func (s *stuckStat) Stat(ctx context.Context, key string) (storage.Attrs, error) {
	if s.armed.Load() {
		s.once.Do(func() { close(s.entered) })
		<-ctx.Done()
		return storage.Attrs{}, &storage.Error{Op: "stat", Key: key, Err: ctx.Err()}
	}
	return s.Store.Stat(ctx, key)
}

// TestRequestsWaitForACheckOnlyUntilTheirDeadline: a check stuck on a
// backend that never answers holds the store's lock; a request that needs
// the lock (a cursor's Sync, a change's reopen, a refresh) gives up at its
// own deadline. Before, they waited on a plain mutex for as long as the
// check did: forever, with no deadline on checks.
func TestRequestsWaitForACheckOnlyUntilTheirDeadline(t *testing.T) {
	t.Parallel()
	st := newClockStore(t)
	putAll(t, st, sceneObjects(t, 1, 0.25))
	st.advance(time.Minute)
	stuck := &stuckStat{Store: st, entered: make(chan struct{})}
	h, err := zvf.OpenHandle(context.Background(), stuck, zvf.Options{Name: "cells"}, zvf.Watch{Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := h.Current()
	if err != nil {
		t.Fatal(err)
	}
	stuck.armed.Store(true)
	check, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = h.Refresh(check) // stuck until stop
	}()
	defer func() { stop(); <-done }()
	<-stuck.entered
	const deadline = 100 * time.Millisecond
	for _, c := range []struct {
		name string
		call func(context.Context) error
	}{
		{"Sync", func(ctx context.Context) error { _, err := h.Sync(ctx); return err }},
		{"Changed", func(ctx context.Context) error { _, err := h.Changed(ctx, s, &storage.ChangedError{}); return err }},
		{"Refresh", func(ctx context.Context) error { _, err := h.Refresh(ctx); return err }},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		res := make(chan error, 1)
		go func() { res <- c.call(ctx) }()
		select {
		case err := <-res:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s behind a stuck check: %v, want DeadlineExceeded", c.name, err)
			}
		case <-time.After(time.Minute):
			t.Errorf("%s behind a stuck check: no answer a minute after its %v deadline", c.name, deadline)
		}
		cancel()
	}
}

// TestSyncAtMostOncePerSecond: paging cursors that name a version the
// handle does not serve (forged, or stale) cost at most one check of the
// store a second, however many arrive. Before, each one cost a full
// metadata check (a listing and a stat per level), queued on the lock.
func TestSyncAtMostOncePerSecond(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	_, fs, h, s := watchedScene(t, zvf.Watch{Enabled: true, Now: clock})
	ctx := context.Background()
	calls := func() int64 { return fs.Calls.Load() }
	before := calls()
	if got, err := h.Sync(ctx); got != s || err != nil {
		t.Fatalf("Sync: %p %v", got, err)
	}
	one := calls() - before
	if one == 0 {
		t.Fatal("the first Sync did not check the store")
	}
	for range 200 {
		if got, err := h.Sync(ctx); got != s || err != nil {
			t.Fatalf("Sync: %p %v", got, err)
		}
	}
	if n := calls() - before; n != one {
		t.Fatalf("201 Syncs within a second made %d storage calls, want the first's %d", n, one)
	}
	now.Add(int64(time.Second))
	if _, err := h.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := calls() - before; n != 2*one {
		t.Fatalf("a Sync a second later: %d storage calls in all, want %d", n, 2*one)
	}
}

// TestOwnersRetriedAfterAFailure: the map from fragments to the objects
// that own them is built from every manifest on first use; a build that
// fails (a backend blip, a request's deadline) is not kept, and the next
// answer builds it again. Before, the first failure was kept for the
// version's lifetime: every later bbox with object ids failed at once.
func TestOwnersRetriedAfterAFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := zvftest.Store(t, filepath.Join(fixtures, "graph.zarrvectors"))
	fs := faultstore.New(st, nil)
	l := zvftest.OpenLevel(t, fs, zvf.Options{Name: "graph"}, 0)
	box := zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}}
	owned := func() (int, error) {
		n := 0
		_, err := l.BBox(ctx, box, func(b *zvf.Batch) error { n += len(b.ObjectIDs); return nil })
		return n, err
	}
	fs.Add(&faultstore.Rule{Key: "object_index", Fault: faultstore.Fault{Err: storage.ErrUnavailable, Times: 1}})
	if _, err := owned(); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("with the manifests unreadable: %v, want ErrUnavailable", err)
	}
	n, err := owned()
	if err != nil || n == 0 {
		t.Fatalf("once the backend is back: %d rows with owners, %v", n, err)
	}
}

// TestOldGenerationNotCachedAfterReopen: once a new version of a store is
// served, a request still running on the old one (it began before the
// swap) gets its answer, but what it loads is not kept: nobody asks for
// the old generation's keys again. Before, such stragglers filled the
// cache with the old generation anew right after its values were
// dropped, evicting live values (other stores', the new version's) until
// those aged out.
func TestOldGenerationNotCachedAfterReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ch := cache.New(64 << 20)
	st := newClockStore(t)
	objs := sceneObjects(t, 1, 0.25)
	putAll(t, st, objs)
	st.advance(time.Minute)
	h, err := zvf.OpenHandle(ctx, st, zvf.Options{Name: "cells", Cache: ch}, zvf.Watch{Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	s1, err := h.Current()
	if err != nil {
		t.Fatal(err)
	}
	want, err := wholeBox(ctx, s1)
	if err != nil {
		t.Fatal(err)
	}
	// A new version: the root metadata written again; the chunks the old
	// version reads are untouched.
	if err := st.Put(ctx, "zarr.json", objs["zarr.json"]); err != nil {
		t.Fatal(err)
	}
	st.advance(time.Minute)
	if changed, err := h.Refresh(ctx); !changed || err != nil {
		t.Fatalf("Refresh: changed=%v err=%v, want a new version", changed, err)
	}
	if s2, err := h.Current(); err != nil || s2 == s1 {
		t.Fatalf("the new version is not served: %v", err)
	}
	before := ch.Stats()
	got, err := wholeBox(ctx, s1)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("a request on the old version after the swap: %d bytes, %v; want its %d bytes", len(got), err, len(want))
	}
	if after := ch.Stats(); after.Items != before.Items || after.Bytes != before.Bytes {
		t.Fatalf("the old version's values were kept after the swap: %d items, %d bytes; before it %d, %d",
			after.Items, after.Bytes, before.Items, before.Bytes)
	}
}

// TestOldGenerationNotCachedAfterOtherStoresReopen: the stores of a
// folder share one cache, and a rewrite of the whole folder reopens them
// all at once. A request still running on one store's old version must
// not fill the cache with it however many other stores reopened after
// it. Before, the cache remembered only the latest 16 retired
// generations of all its stores together: once 16 others had reopened,
// the straggler's values were kept again (and evicted live ones).
func TestOldGenerationNotCachedAfterOtherStoresReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ch := cache.New(64 << 20)
	st := newClockStore(t)
	objs := sceneObjects(t, 1, 0.25)
	putAll(t, st, objs)
	st.advance(time.Minute)
	const others = 40 // more than the 16 the cache once remembered
	var handles []*zvf.Handle
	for i := range others + 1 {
		h, err := zvf.OpenHandle(ctx, st, zvf.Options{Name: fmt.Sprintf("s%02d", i), Cache: ch}, zvf.Watch{Enabled: true})
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, h)
	}
	s1, err := handles[0].Current()
	if err != nil {
		t.Fatal(err)
	}
	want, err := wholeBox(ctx, s1)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "zarr.json", objs["zarr.json"]); err != nil {
		t.Fatal(err)
	}
	st.advance(time.Minute)
	// s00 reopens first, the others after it.
	for _, h := range handles {
		if changed, err := h.Refresh(ctx); !changed || err != nil {
			t.Fatalf("Refresh: changed=%v err=%v, want a new version", changed, err)
		}
	}
	before := ch.Stats()
	got, err := wholeBox(ctx, s1)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("a request on the old version after the swaps: %d bytes, %v; want its %d bytes", len(got), err, len(want))
	}
	if after := ch.Stats(); after.Items != before.Items || after.Bytes != before.Bytes {
		t.Fatalf("the old version's values were kept after %d other stores reopened: %d items, %d bytes; before, %d, %d",
			others, after.Items, after.Bytes, before.Items, before.Bytes)
	}
}
