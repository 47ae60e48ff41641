package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// hookStore runs hook (once) before the n-th read of a chunk (a key
// containing match and ending in /c/0) after it is armed: a store
// rewritten while an answer is being read.
type hookStore struct {
	storage.Store
	match string
	n     int64
	armed *atomic.Bool
	seen  *atomic.Int64
	once  *sync.Once
	hook  func()
}

func newHookStore(st storage.Store, match string, n int64, hook func()) *hookStore {
	return &hookStore{Store: st, match: match, n: n, armed: new(atomic.Bool), seen: new(atomic.Int64), once: new(sync.Once), hook: hook}
}

func (h *hookStore) Get(ctx context.Context, key string, o storage.ReadOptions) (storage.Object, error) {
	if h.armed.Load() && strings.Contains(key, h.match) && strings.HasSuffix(key, "/c/0") && h.seen.Add(1) == h.n {
		h.once.Do(h.hook)
	}
	return h.Store.Get(ctx, key, o)
}

// Pin keeps the local store's link handling visible through the hook.
func (h *hookStore) Pin(ctx context.Context) (storage.Store, string, error) {
	if p, ok := h.Store.(interface {
		Pin(context.Context) (storage.Store, string, error)
	}); ok {
		v, id, err := p.Pin(ctx)
		if err != nil {
			return nil, "", err
		}
		c := *h
		c.Store = v
		return &c, id, nil
	}
	return h, "", nil
}

// watched serves st as store name through a watching handle, opened.
func watched(t *testing.T, name string, st storage.Store) (*zvf.Handle, *api.Server) {
	t.Helper()
	hs, srv := watchedServer(t, map[string]storage.Store{name: st}, cache.New(64<<20), api.Options{})
	if _, err := hs[name].Current(); err != nil {
		t.Fatal(err)
	}
	return hs[name], srv
}

// watchedServer serves each store of sts as its name through a watching
// handle reading through ch, with the other options of o, and returns the
// handles by name.
func watchedServer(t *testing.T, sts map[string]storage.Store, ch *cache.Cache, o api.Options) (map[string]*zvf.Handle, *api.Server) {
	t.Helper()
	hs := make(map[string]*zvf.Handle, len(sts))
	for name, st := range sts {
		h, err := zvf.OpenHandle(context.Background(), st, zvf.Options{Name: name, Cache: ch}, zvf.Watch{Enabled: true, Settle: settleTime})
		if err != nil {
			t.Fatal(err)
		}
		hs[name] = h
		o.Handles = append(o.Handles, h)
	}
	srv := apitest.New(t, o)
	return hs, srv
}

// handleServer serves st through one handle (zo names it; w says how it
// checks for changes) on a server with the options so.
func handleServer(t *testing.T, st storage.Store, zo zvf.Options, w zvf.Watch, so api.Options) (*zvf.Handle, *api.Server) {
	t.Helper()
	h, err := zvf.OpenHandle(context.Background(), st, zo, w)
	if err != nil {
		t.Fatal(err)
	}
	so.Handles = append(so.Handles, h)
	srv := apitest.New(t, so)
	return h, srv
}

// rewrittenFixture is the store the version tests copy and rewrite in
// place, every file each time: the smallest reference store with
// uncompressed vertex chunks (skeleton: 223 files, 23 vertex chunks;
// points_bins has 1,174 and 128), since a rewrite costs a syscall or ten
// a file and shows the same thing.
const rewrittenFixture = "skeleton.zarrvectors"

// rewriteInPlace replaces the store in dir by the one in src, file by file
// (each renamed into place), then removes what src does not have.
func rewriteInPlace(t *testing.T, dir, src string) {
	t.Helper()
	if err := rewrite(dir, src); err != nil {
		t.Error(err)
	}
}

// rewrite is rewriteInPlace returning its error, for a writer running
// outside the test's goroutine.
func rewrite(dir, src string) error {
	w, err := blobstore.Open(context.Background(), dir)
	if err != nil {
		return err
	}
	err = syncTree(context.Background(), w, src, nil)
	pruneEmptyDirs(dir)
	return errors.Join(err, w.Close())
}

// getAfterSettling is a client that honours 503 store-changing: it asks
// again once the store has settled. It returns the first answer too.
func getAfterSettling(t *testing.T, h http.Handler, st storage.Store, path string) (first, final []byte, firstCode int, hdr http.Header) {
	t.Helper()
	code, hdr, body := serveFull(t, h, path)
	first, firstCode = body, code
	for i := 0; code == http.StatusServiceUnavailable && i < 5; i++ {
		var p api.Problem
		if json.Unmarshal(body, &p) != nil || !strings.HasSuffix(p.Type, "/store-changing") || hdr.Get("Retry-After") == "" {
			t.Fatalf("503 that is not store-changing: %s", body)
		}
		settled(t, st)
		code, hdr, body = serveFull(t, h, path)
	}
	if code != 200 {
		t.Fatalf("%s: %d %.300s", path, code, body)
	}
	return first, body, firstCode, hdr
}

// TestRewriteDuringAnswer: a store rewritten in place while a whole-store
// bbox is being read gives an answer of the old version or of the new one
// (or 503 store-changing, then the new one) — never a mix. Before, the
// answer mixed old and new chunks (a count matching neither version) under
// the old strong ETag.
func TestRewriteDuringAnswer(t *testing.T) {
	t.Parallel()
	const box = "/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&attributes=*"
	oldDir := filepath.Join(fixtures, rewrittenFixture)
	// The two versions differ in every vertex chunk: the new one is the old
	// one with each chunk's rows in reverse order.
	newCopy := zvftest.CopyTree(t, oldDir)
	reverseRows(t, newCopy)
	_, _, want0 := serveFull(t, localServer(t, "s", oldDir).Handler(), box)
	_, _, want1 := serveFull(t, localServer(t, "s", newCopy).Handler(), box)
	if bytes.Equal(want0, want1) {
		t.Fatal("the two versions answer alike, so the test proves nothing")
	}
	// One copy, rewritten in turn to the other version (old to new, new to
	// old, old to new): each case starts from what the last one left.
	dir := zvftest.CopyTree(t, oldDir)
	from, to := oldDir, newCopy
	for _, after := range []int64{1, 3, 6} {
		base, err := blobstore.Open(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		// The hook runs in whichever goroutine reads that chunk: a cache
		// load the answer need not wait for (it may fail 503 first and
		// leave it writing). So the writer reports back here, and the
		// client asks again only once it has finished, as one that honours
		// Retry-After would after a real writer.
		src, wrote := to, make(chan error, 1)
		hs := newHookStore(base, "/vertices/", after, func() { wrote <- rewrite(dir, src) })
		_, srv := watched(t, "s", hs)
		hs.armed.Store(true)
		code, _, first := serveFull(t, srv.Handler(), box)
		switch {
		case code == 200 && !bytes.Equal(first, want0) && !bytes.Equal(first, want1):
			t.Fatalf("rewrite at read %d: a 200 answer of neither version (%d bytes; versions %d and %d)", after, len(first), len(want0), len(want1))
		case code != 200:
			wantProblem(t, fmt.Sprintf("rewrite at read %d", after), code, first, "store-changing")
		}
		select {
		case err := <-wrote:
			if err != nil {
				t.Fatalf("rewrite at read %d: %v", after, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("rewrite at read %d: the hook never ran (or never finished)", after)
		}
		_, final, _, _ := getAfterSettling(t, srv.Handler(), base, box)
		if want := map[string][]byte{oldDir: want0, newCopy: want1}[src]; !bytes.Equal(final, want) {
			t.Fatalf("rewrite at read %d: after settling the answer is not the new version's", after)
		}
		_ = base.Close()
		from, to = to, from
	}
}

// reversedRows is b's 12-byte rows (3 float32) in reverse order: a chunk
// rewritten in place, same size, other bytes.
func reversedRows(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := len(b) - 12; i >= 0; i -= 12 {
		out = append(out, b[i:i+12]...)
	}
	return out
}

// reverseRows reverses the order of the 12-byte vertex rows of every
// chunk of dir (an uncompressed store).
func reverseRows(t *testing.T, dir string) {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(dir, "*", "vertices", "*", "c", "0"))
	if len(matches) == 0 {
		t.Fatal("no vertex chunks")
	}
	for _, p := range matches {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, reversedRows(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStaleCursor: a paging cursor issued by one version of a store is
// refused by the next (409 stale-cursor): its offset counts rows of a
// version that is gone. Before, it was accepted and paged into the new
// version's rows.
func TestStaleCursor(t *testing.T) {
	t.Parallel()
	dir := zvftest.CopyTree(t, filepath.Join(fixtures, rewrittenFixture))
	base := zvftest.Store(t, dir)
	_, srv := watched(t, "s", base)
	code, hdr, body := serveFull(t, srv.Handler(), "/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&limit=10")
	next := hdr.Get("X-Next-Cursor")
	if code != 200 || next == "" {
		t.Fatalf("first page: %d %s %.200s", code, next, body)
	}
	page2 := "/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&limit=10&cursor=" + next
	if code, _, body := serveFull(t, srv.Handler(), page2); code != 200 {
		t.Fatalf("second page, same version: %d %.200s", code, body)
	}
	rewriteInPlace(t, dir, filepath.Join(fixtures, rewrittenFixture))
	settled(t, base)
	if err := srv.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, _, body = serveFull(t, srv.Handler(), page2)
	var p api.Problem
	if code != http.StatusConflict || json.Unmarshal(body, &p) != nil || !strings.HasSuffix(p.Type, "/stale-cursor") {
		t.Fatalf("old cursor on the new version: %d %s", code, body)
	}
}

// TestLinkedRootRepointed: a store served through a link (current -> v1)
// is seen to change when the link is re-pointed (current -> v2), and every
// answer after the refresh is v2's. Before, the link's own entry was all a
// walk saw, so the change never was.
func TestLinkedRootRepointed(t *testing.T) {
	t.Parallel()
	base, v1, v2, cur := linkedVersions(t)
	st := zvftest.Store(t, cur)
	_, srv := watched(t, "s", st)
	paths := []string{"/api/v1/stores/s", "/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&attributes=*", "/api/v1/stores/s/levels/0/chunks"}
	compare := func(step, dir string) map[string]string {
		t.Helper()
		tags := map[string]string{}
		local := localServer(t, "s", dir)
		for _, p := range paths {
			c1, h1, b1 := serveFull(t, srv.Handler(), p)
			c2, _, b2 := serveFull(t, local.Handler(), p)
			if c1 != c2 || !bytes.Equal(withoutVersion(b1), withoutVersion(b2)) {
				t.Fatalf("%s: %s: served %d %.200s, want %d %.200s", step, p, c1, b1, c2, b2)
			}
			tags[p] = h1.Get("ETag")
		}
		return tags
	}
	before := compare("v1", v1)
	repoint(t, base, cur)
	if err := srv.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := compare("v2", v2)
	if before[paths[1]] == after[paths[1]] {
		t.Fatal("ETag kept across versions")
	}
}

// linkedVersions lays out a store served through a link: base/v1 (the
// graph fixture) and base/v2 (skeleton, the smallest: copies cost a
// write a file), and base/current -> v1.
func linkedVersions(t *testing.T) (base, v1, v2, cur string) {
	t.Helper()
	base = t.TempDir()
	v1, v2, cur = filepath.Join(base, "v1"), filepath.Join(base, "v2"), filepath.Join(base, "current")
	zvftest.CopyInto(t, filepath.Join(fixtures, "graph.zarrvectors"), v1)
	zvftest.CopyInto(t, filepath.Join(fixtures, "skeleton.zarrvectors"), v2)
	if err := os.Symlink("v1", cur); err != nil {
		t.Fatal(err)
	}
	return base, v1, v2, cur
}

// repoint flips the link cur to v2 at once, as ln -sfn v2 current does
// (a new link renamed over the old).
func repoint(t *testing.T, base, cur string) {
	t.Helper()
	tmp := filepath.Join(base, "next")
	if err := os.Symlink("v2", tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, cur); err != nil {
		t.Fatal(err)
	}
}

// TestDataOnlyChange: one chunk rewritten in place, metadata untouched.
// The cheap check (metadata only) does not see it; a read of that chunk
// does (its file is newer than the version), and so does the whole-store
// walk an operator can ask for. Either way the answers after it are the
// new content under new ETags.
func TestDataOnlyChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const chunkPath, descPath = "/api/v1/stores/g/levels/0/chunks/3.4.2", "/api/v1/stores/g"
	sc := copyStore(t, "graph")
	dir := sc.dir
	for _, how := range []string{"read", "walk"} {
		t.Run(how, func(t *testing.T) {
			base := zvftest.Store(t, dir)
			_, srv := watched(t, "g", base)
			_, hdr0, _ := serveFull(t, srv.Handler(), descPath)
			_, _, body0 := serveFull(t, localServer(t, "g", dir).Handler(), chunkPath)
			if how == "walk" {
				if err := srv.RefreshDeep(ctx); err != nil { // the walk's baseline
					t.Fatal(err)
				}
				if code, _, body := serveFull(t, srv.Handler(), chunkPath); code != 200 || !bytes.Equal(body, body0) {
					t.Fatalf("before the change: %d %.200s", code, body)
				}
			}
			// A write within a clock tick of the open may carry an earlier
			// time than the open (see localfs.Store.Now); this one is later.
			settled(t, base)
			sc.change(t, edit(hostileChunk, reversedRows))
			settled(t, base)
			if err := srv.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			if how == "walk" {
				if code, _, body := serveFull(t, srv.Handler(), chunkPath); code != 200 || !bytes.Equal(body, body0) {
					t.Fatalf("cached chunk after the metadata check: %d (the cheap check reads no data)", code)
				}
				if err := srv.RefreshDeep(ctx); err != nil {
					t.Fatal(err)
				}
			}
			_, body, _, _ := getAfterSettling(t, srv.Handler(), base, chunkPath)
			_, _, want := serveFull(t, localServer(t, "g", dir).Handler(), chunkPath)
			if !bytes.Equal(body, want) || bytes.Equal(body, body0) {
				t.Fatalf("after the change: %.200s, want %.200s", body, want)
			}
			if _, hdr, _ := serveFull(t, srv.Handler(), descPath); hdr.Get("ETag") == hdr0.Get("ETag") {
				t.Fatal("ETag kept across versions")
			}
		})
	}
}

// TestRevalidationCost: opening and checking a store costs a fixed number
// of storage calls — a listing and a stat per level — whatever the number
// of its objects; no call lists the whole store. Before, both walked every
// object (1–3 s and ~150k system calls per check on a 52k-file store, and
// on S3 a LIST call per thousand objects).
func TestRevalidationCost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	calls := map[string]map[string]int64{}
	for _, name := range []string{"points_bins", "points_pyramid", "graph"} {
		base := zvftest.Store(t, filepath.Join(fixtures, name+".zarrvectors"))
		fs := &countingStore{Store: base, n: map[string]int64{}}
		h, err := zvf.OpenHandle(ctx, fs, zvf.Options{Name: name}, zvf.Watch{Enabled: true})
		if err != nil {
			t.Fatal(err)
		}
		s, err := h.Current()
		if err != nil {
			t.Fatal(err)
		}
		if fs.count("walk") != 0 {
			t.Errorf("%s: opening walked the store", name)
		}
		fs.reset()
		for range 3 {
			if changed, err := h.Refresh(ctx); changed || err != nil {
				t.Fatalf("%s: Refresh of an unchanged store: %v %v", name, changed, err)
			}
		}
		levels := int64(len(s.Levels()))
		if got := fs.count("stat"); got != 3*(1+levels) {
			t.Errorf("%s: %d stats in 3 checks, want %d (root and each level)", name, got, 3*(1+levels))
		}
		if got := fs.count("list"); got != 3 {
			t.Errorf("%s: %d listings in 3 checks, want 3", name, got)
		}
		if got := fs.count("walk") + fs.count("get"); got != 0 {
			t.Errorf("%s: %d reads or walks in 3 checks", name, got)
		}
		calls[name] = fs.n
	}
	t.Logf("storage calls per 3 checks: %v", calls)
}

// countingStore counts calls by operation.
type countingStore struct {
	storage.Store
	mu sync.Mutex
	n  map[string]int64
}

func (c *countingStore) add(op string) {
	c.mu.Lock()
	c.n[op]++
	c.mu.Unlock()
}

func (c *countingStore) count(op string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[op]
}

func (c *countingStore) reset() {
	c.mu.Lock()
	c.n = map[string]int64{}
	c.mu.Unlock()
}

func (c *countingStore) Get(ctx context.Context, k string, o storage.ReadOptions) (storage.Object, error) {
	c.add("get")
	return c.Store.Get(ctx, k, o)
}

func (c *countingStore) Stat(ctx context.Context, k string) (storage.Attrs, error) {
	c.add("stat")
	return c.Store.Stat(ctx, k)
}

func (c *countingStore) List(ctx context.Context, p string) (storage.Listing, error) {
	c.add("list")
	return c.Store.List(ctx, p)
}

func (c *countingStore) Walk(ctx context.Context, p string, fn func(string, storage.Attrs) error) error {
	c.add("walk")
	return c.Store.Walk(ctx, p, fn)
}

// TestCursorFromNewerReplica: behind a load balancer a client pages with a
// cursor one replica issued after it saw the store's new version, and the
// next page goes to a replica that has not checked the store since. That
// cursor is not stale: the replica checks the store and answers the page
// from the new version (503 store-changing while it settles). Before, it
// was refused 409 stale-cursor (TestFleet saw it). A cursor of a version
// that never existed is still 409.
func TestCursorFromNewerReplica(t *testing.T) {
	t.Parallel()
	src := filepath.Join(fixtures, rewrittenFixture)
	dir := zvftest.CopyTree(t, src)
	open := func() storage.Store {
		st := zvftest.Store(t, dir)
		return st
	}
	stA, stB := open(), open()
	_, a := watched(t, "s", stA)
	_, b := watched(t, "s", stB)
	const box = "/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&limit=10"

	rewriteInPlace(t, dir, src)
	settled(t, stA)
	if err := a.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, hdr, body := serveFull(t, a.Handler(), box)
	next := hdr.Get("X-Next-Cursor")
	if code != 200 || next == "" {
		t.Fatalf("first page from the replica on the new version: %d %q %.200s", code, next, body)
	}
	page2 := box + "&cursor=" + next
	wantCode, wantHdr, want := serveFull(t, a.Handler(), page2)
	if wantCode != 200 {
		t.Fatalf("second page from the same replica: %d %.200s", wantCode, want)
	}
	code, hdr, body = serveFull(t, b.Handler(), page2)
	if code != 200 || !bytes.Equal(body, want) || hdr.Get("ETag") != wantHdr.Get("ETag") {
		t.Fatalf("second page from the replica that had not checked: %d %.300s\nwant %d (etag %s) %.300s", code, body, wantCode, wantHdr.Get("ETag"), want)
	}

	// A cursor naming a version neither replica has served.
	// The token: format byte, 8-byte query hash, level, then the
	// version, length first (api/cursor.go).
	forged, err := base64.RawURLEncoding.DecodeString(next)
	if err != nil || len(forged) < 27 || forged[0] != 2 || forged[9] != 0 || forged[10] != 16 {
		t.Fatalf("cursor %q is not a format 2 token of level 0 with a 16-byte version", next)
	}
	copy(forged[11:27], "0123456789abcdef")
	code, _, body = serveFull(t, b.Handler(), box+"&cursor="+base64.RawURLEncoding.EncodeToString(forged))
	var p api.Problem
	if code != http.StatusConflict || json.Unmarshal(body, &p) != nil || !strings.HasSuffix(p.Type, "/stale-cursor") {
		t.Fatalf("cursor of no version: %d %s", code, body)
	}
}

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
		st := zvftest.Store(t, dir)
		return st
	}
	dirA := zvftest.CopyTree(t, filepath.Join(fixtures, rewrittenFixture))
	stA := open(dirA)
	stB := &hangingStat{Store: open(zvftest.CopyTree(t, filepath.Join(fixtures, "graph.zarrvectors"))), entered: make(chan struct{}, 1)}
	ch := cache.New(64 << 20)
	hs, srv := watchedServer(t, map[string]storage.Store{"a": stA, "b": stB}, ch, api.Options{Cache: ch})
	hA := hs["a"]
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
	rewriteInPlace(t, dirA, filepath.Join(fixtures, rewrittenFixture))
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
	base := zvftest.Store(t, filepath.Join(fixtures, "points_bins.zarrvectors"))
	cs := &countingStore{Store: base, n: map[string]int64{}}
	frozen := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	_, srv := handleServer(t, cs, zvf.Options{Name: "s"}, zvf.Watch{Enabled: true, Now: func() time.Time { return frozen }}, api.Options{})
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
	_, srv := handleServer(t, st, zvf.Options{Name: "s", Cache: ch}, zvf.Watch{Enabled: true, Settle: settleTime, Now: now}, api.Options{Cache: ch})
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
			w := zvftest.Store(t, "mem://")
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
			oracle := apitest.New(t, api.Options{Stores: []*zvf.Store{fresh}})
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
	// The cases of a fixture share one copy in turn, what a case deleted
	// put back when it ends: copying a store cost more than a case.
	copies := map[string]*storeCopy{}
	for _, tc := range cases {
		sc, ok := copies[tc.fixture]
		if !ok {
			sc = copyStore(t, tc.fixture)
			copies[tc.fixture] = sc
		}
		t.Run(tc.name, func(t *testing.T) {
			dir := sc.dir
			st := zvftest.Store(t, dir)
			settled(t, st)
			srv, ch := watchedCached(t, st, nil)
			code, hdr, body := serveFull(t, srv.Handler(), tc.path)
			if code != 200 {
				t.Fatalf("before the delete: %d %.300s", code, body)
			}
			etag := hdr.Get("ETag")
			settled(t, st) // the delete comes after the open by the folder's clock
			for _, p := range tc.deleted {
				sc.change(t, remove(p))
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
		st := zvftest.Store(t, cur)
		settled(t, st)
		_, srv := handleServer(t, st, zvf.Options{Name: "s", Cache: cache.New(64 << 20)}, zvf.Watch{Enabled: watch, Settle: settleTime}, api.Options{})
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

// versionField is a descriptor's "version": the revision of the storage
// that served it, which differs between two copies of one store.
var versionField = regexp.MustCompile(`,"version":"[0-9a-f]*"`)

// withoutVersion is an answer with its descriptor's version left out, for
// comparing one store served from two places.
func withoutVersion(b []byte) []byte { return versionField.ReplaceAll(b, nil) }
