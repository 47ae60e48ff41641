package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
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

// hangingStat is a store whose Stat, once armed, never answers until its
// caller gives up (a backend that hangs mid-check); entries counts the
// Stats that hung, and entered is signalled at each.
type hangingStat struct {
	storage.Store
	armed   atomic.Bool
	entries atomic.Int64
	entered chan struct{}
}

func (s *hangingStat) Stat(ctx context.Context, key string) (storage.Attrs, error) {
	if !s.armed.Load() {
		return s.Store.Stat(ctx, key)
	}
	s.entries.Add(1)
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return storage.Attrs{}, &storage.Error{Op: "stat", Key: key, Err: ctx.Err()}
}

// waitFor polls cond until it holds, failing t after a minute: for state
// that background checks reach on their own schedule.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
	}
}

// TestChecksRunPerStore: one store's backend hangs in the middle of its
// check; the other store beside it is still checked on schedule (its new
// version is served), and the hung check ends by its deadline, after
// which that store is checked again. Before, checks ran one store after
// another with no deadline: the hung check stopped the revalidation of
// every store (a local store beside it was still stale after 90 s).
func TestChecksRunPerStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	open := func(dir string) storage.Store {
		st, err := blobstore.Open(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	dirA := zvftest.CopyTree(t, filepath.Join(fixtures, "points_bins.zarrvectors"))
	stA := open(dirA)
	stB := &hangingStat{Store: open(zvftest.CopyTree(t, filepath.Join(fixtures, "graph.zarrvectors"))), entered: make(chan struct{}, 1)}
	ch := cache.New(64 << 20)
	var handles []*zvf.Handle
	for name, st := range map[string]storage.Store{"a": stA, "b": stB} {
		h, err := zvf.OpenHandle(ctx, st, zvf.Options{Name: name, Cache: ch}, zvf.Watch{Enabled: true, Settle: settleTime})
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, h)
	}
	srv, err := api.New(api.Options{Handles: handles, Cache: ch})
	if err != nil {
		t.Fatal(err)
	}
	hA := handles[0]
	if hA.Name() != "a" {
		hA = handles[1]
	}
	before, err := hA.Current()
	if err != nil {
		t.Fatal(err)
	}
	stB.armed.Store(true)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Revalidate(rctx, 10*time.Millisecond, 200*time.Millisecond, false)
	}()
	defer func() { stop(); <-done }()
	<-stB.entered // b's check hangs now
	const box = "/api/v1/stores/a/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&attributes=*"
	_, oldHdr, want := serveFull(t, srv.Handler(), box)
	// Every object rewritten (the same bytes): a new version, nothing pruned.
	rewriteInPlace(t, dirA, filepath.Join(fixtures, "points_bins.zarrvectors"))
	waitFor(t, "a's new version served while b's backend hangs", func() bool {
		s, err := hA.Current()
		return err == nil && s != before
	})
	code, hdr, body := serveFull(t, srv.Handler(), box)
	if code != 200 || !bytes.Equal(body, want) || hdr.Get("ETag") == oldHdr.Get("ETag") {
		t.Fatalf("a after its change: %d (ETag %s, was %s) %.200s", code, hdr.Get("ETag"), oldHdr.Get("ETag"), body)
	}
	waitFor(t, "b checked again after its hung check's deadline", func() bool { return stB.entries.Load() >= 2 })
}

// TestForgedCursorsCostOneCheckASecond: paging cursors that name a
// version no replica served (forged, or from a store long replaced) are
// refused 409 stale-cursor, and however many arrive they cost at most one
// check of the store a second. Before, each one cost a full metadata
// check (200 requests: 400 directory listings; on S3 a LIST and HEADs
// each), queued on the store's lock.
func TestForgedCursorsCostOneCheckASecond(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base, err := blobstore.Open(ctx, filepath.Join(fixtures, "points_bins.zarrvectors"))
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	cs := &countingStore{Store: base, n: map[string]int64{}}
	frozen := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h, err := zvf.OpenHandle(ctx, cs, zvf.Options{Name: "s"}, zvf.Watch{Enabled: true, Now: func() time.Time { return frozen }})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Options{Handles: []*zvf.Handle{h}})
	if err != nil {
		t.Fatal(err)
	}
	const box = "/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&limit=10"
	_, hdr, _ := serveFull(t, srv.Handler(), box)
	forged := forgeCursor(t, hdr.Get("X-Next-Cursor"), "0123456789abcdef")
	cs.reset()
	for i := range 200 {
		code, _, body := serveFull(t, srv.Handler(), box+"&cursor="+forged)
		if code != http.StatusConflict || !strings.Contains(string(body), "/stale-cursor") {
			t.Fatalf("forged cursor %d: %d %.200s", i, code, body)
		}
	}
	if n := cs.count("list"); n != 1 {
		t.Fatalf("200 forged cursors within a second: %d listings, want 1", n)
	}
}

// forgeCursor is cursor with its 16-byte version replaced. The token:
// format byte, 8-byte query hash, level, then the version, length first
// (api/cursor.go).
func forgeCursor(t *testing.T, cursor, version string) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(b) < 27 || b[0] != 2 || b[10] != 16 || len(version) != 16 {
		t.Fatalf("cursor %q is not a format 2 token with a 16-byte version", cursor)
	}
	copy(b[11:27], version)
	return base64.RawURLEncoding.EncodeToString(b)
}
