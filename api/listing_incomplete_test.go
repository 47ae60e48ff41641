package api_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/faultstore"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestIncompleteListingIs503: an object store whose listing has not
// caught up with a write (eventual consistency) leaves a chunk of level 0
// out of the listing taken when the store opens, though the chunk reads.
// The level's count was a quietly smaller 200 (599 where the level
// declares 600) for as long as the server ran. Now the answer lists the
// level again — the box reaches past the store's bounds, where no cell is
// asked for one by one; or, having read every listed chunk, it finds they
// hold fewer vertices than the level declares — finds the chunk, and the level's
// answers are a 503 that says the listing was incomplete, with
// Retry-After, until the store has been opened (listed) again — then 600.
func TestIncompleteListingIs503(t *testing.T) {
	t.Parallel()
	fs := faultstore.New(zvftest.Store(t, fixtures+"/graph.zarrvectors"), nil)
	// Every listing taken while the store opens lacks the chunk; those
	// taken later have it.
	fs.Add(&faultstore.Rule{Op: "list", Fault: faultstore.Fault{Hide: "3.2.5"}})
	// The store's reopen waits for it to have been quiet this long, by
	// the storage's clock: long enough that the first answers see the 503.
	const settle = 2 * time.Second
	_, srv := handleServer(t, fs, zvf.Options{Name: "g", Cache: cache.New(64 << 20)}, zvf.Watch{Enabled: true, Settle: settle}, api.Options{})
	fs.Reset()
	const path = "/api/v1/stores/g/count?level=0&min=-1e6,-1e6,-1e6&max=1e6,1e6,1e6"

	code, hdr, body := serveFull(t, srv.Handler(), path)
	var p struct {
		Type, Detail string
		Status       int
	}
	_ = json.Unmarshal(body, &p)
	ra, _ := strconv.Atoi(hdr.Get("Retry-After"))
	if code != 503 || hdr.Get("Content-Type") != "application/problem+json" || p.Type != "https://zvfserve.dev/problems/store-changing" ||
		!strings.Contains(p.Detail, `store "g" level 0`) || !strings.Contains(p.Detail, "listing") || !strings.Contains(p.Detail, "3.2.5") ||
		!(strings.Contains(p.Detail, "of the 600 vertices") || strings.Contains(p.Detail, "a listing taken again for a box")) || ra < 1 {
		t.Fatalf("count with chunk 3.2.5 left out of the listing: %d %v %s; want 503 store-changing naming the level, the listing and the chunk, with Retry-After", code, hdr, body)
	}
	// Until the store is listed again, every answer of the level says so,
	// warm as it is.
	if code, _, body := serveFull(t, srv.Handler(), path); code != 503 || !strings.Contains(string(body), "3.2.5") {
		t.Fatalf("the next count: %d %s, want the 503 again", code, body)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		code, _, body := serveFull(t, srv.Handler(), path)
		if code == 200 {
			if strings.TrimSpace(string(body)) != `{"count":600}` {
				t.Fatalf("once the store was listed again: %s, want the 600 vertices the level declares", body)
			}
			break
		}
		if code != 503 || !strings.Contains(string(body), "3.2.5") || time.Now().After(deadline) {
			t.Fatalf("while the store settles: %d %s, want the 503 until it is listed again", code, body)
		}
	}
}

// TestWrongVertexCountIsServed: a level whose metadata declares more
// vertices than its chunks hold, with nothing missing from the listing
// (listing it again finds the same chunks), is served as it is — its
// metadata is wrong, which validate reports — not refused for ever; and
// on a store served as immutable a listing that was incomplete says that
// only a restart lists it again, without a Retry-After that would not
// hold.
func TestWrongVertexCountIsServed(t *testing.T) {
	t.Parallel()
	const path = "/api/v1/stores/g/count?level=0&min=-1e6,-1e6,-1e6&max=1e6,1e6,1e6"
	sc := copyStore(t, "graph")
	sc.change(t, edit("0/zarr.json", func(b []byte) []byte {
		return []byte(strings.Replace(string(b), `"vertex_count": 600`, `"vertex_count": 601`, 1))
	}))
	_, srv := handleServer(t, zvftest.Store(t, sc.dir), zvf.Options{Name: "g", Cache: cache.New(64 << 20)}, zvf.Watch{Enabled: true, Settle: settleTime}, api.Options{})
	for i := range 2 {
		if code, _, body := serveFull(t, srv.Handler(), path); code != 200 || strings.TrimSpace(string(body)) != `{"count":600}` {
			t.Fatalf("count %d of a level declaring 601 vertices, 600 stored and all listed: %d %s, want 200 and 600", i, code, body)
		}
	}

	fs := faultstore.New(zvftest.Store(t, fixtures+"/graph.zarrvectors"), nil)
	fs.Add(&faultstore.Rule{Op: "list", Key: "0/vertices/", Nth: 1, Fault: faultstore.Fault{Hide: "3.2.5"}})
	_, still := handleServer(t, fs, zvf.Options{Name: "g", Cache: cache.New(64 << 20)}, zvf.Watch{}, api.Options{})
	code, hdr, body := serveFull(t, still.Handler(), path)
	if code != 503 || hdr.Get("Retry-After") != "" || !strings.Contains(string(body), "3.2.5") || !strings.Contains(string(body), "after a restart") {
		t.Fatalf("an incomplete listing of a store served as immutable: %d %v %s, want 503 naming the chunk and the restart, without Retry-After", code, hdr, body)
	}
}

// TestListingBehindAnotherFamilyIsListedAgain: on a store that may change,
// the listing of a level's vertex chunks lacks one that the listing of
// its fragment indexes, taken a moment later as the level opens, has: the
// vertex listing had not caught up. It is taken again then, and the level
// opens whole: the first count is 600, with no 503 (before: 599).
func TestListingBehindAnotherFamilyIsListedAgain(t *testing.T) {
	t.Parallel()
	fs := faultstore.New(zvftest.Store(t, fixtures+"/graph.zarrvectors"), nil)
	fs.Add(&faultstore.Rule{Op: "list", Key: "0/vertices/", Nth: 1, Fault: faultstore.Fault{Hide: "3.2.5"}})
	_, srv := handleServer(t, fs, zvf.Options{Name: "g", Cache: cache.New(64 << 20)}, zvf.Watch{Enabled: true, Settle: settleTime}, api.Options{})
	const path = "/api/v1/stores/g/count?level=0&min=-1e6,-1e6,-1e6&max=1e6,1e6,1e6"
	if code, _, body := serveFull(t, srv.Handler(), path); code != 200 || strings.TrimSpace(string(body)) != `{"count":600}` {
		t.Fatalf("count of a level whose vertex listing lagged its fragment listing: %d %s, want 200 and 600", code, body)
	}
	if code, _, body := serveFull(t, srv.Handler(), "/api/v1/stores/g/levels/0/chunks/3.2.5"); code != 200 {
		t.Fatalf("the chunk the first listing lacked: %d %.200s", code, body)
	}
}

// TestUnlistedChunkNamedIs503: while a level's listing lacks a chunk (an
// object store's listing behind its writes), an object whose manifest
// names it, and a box whose cross-chunk links lead into it, were a 422
// corrupt-data "names chunk 3.2.5, which does not exist" — the store is
// whole — for as long as the server ran, as nothing told it to list the
// store again. Now the level is listed again when its metadata names a
// chunk its listing lacks: the chunk is there, so the answer is the 503
// store-changing the listing check gives, with Retry-After, and once the
// store has been listed again, the object and the box answer 200.
func TestUnlistedChunkNamedIs503(t *testing.T) {
	t.Parallel()
	const (
		object = "/api/v1/stores/g/objects/1"
		box    = "/api/v1/stores/g/bbox?min=401,201,501&max=499,299,599" // chunk 4.2.5, linked to 3.2.5
	)
	for _, path := range []string{object, object + "/manifest", box} {
		fs := faultstore.New(zvftest.Store(t, fixtures+"/graph.zarrvectors"), nil)
		fs.Add(&faultstore.Rule{Op: "list", Fault: faultstore.Fault{Hide: "3.2.5"}})
		_, srv := handleServer(t, fs, zvf.Options{Name: "g", Cache: cache.New(64 << 20)}, zvf.Watch{Enabled: true, Settle: time.Second}, api.Options{})
		fs.Reset()
		code, hdr, body := serveFull(t, srv.Handler(), path)
		ra, _ := strconv.Atoi(hdr.Get("Retry-After"))
		if code != 503 || !strings.Contains(string(body), "store-changing") || !strings.Contains(string(body), "3.2.5") ||
			!strings.Contains(string(body), "listing") || ra < 1 {
			t.Fatalf("%s with chunk 3.2.5 left out of the listing: %d %v %.400s; want 503 store-changing naming the chunk and the listing, with Retry-After", path, code, hdr, body)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			code, _, body := serveFull(t, srv.Handler(), path)
			if code == 200 {
				break
			}
			if code != 503 || time.Now().After(deadline) {
				t.Fatalf("%s while the store is listed again: %d %.300s, want 503 then 200", path, code, body)
			}
		}
	}
}

// TestUnlistedChunkInBoxIs503: a box over chunk 3.2.5 alone, which the
// level's listing lacks (an object store's listing behind its writes),
// was a 200 with no vertices — the chunk has one in the box — for as long as the
// server ran: the listing check fires only once every listed chunk has
// been read (a box reads those it covers), and only on a level that
// declares its vertex_count. Now the box's cells that the listing lacks
// are asked for one by one: the chunk is there, so the answer is the 503
// store-changing of an incomplete listing, with Retry-After, and once
// the store has been listed again the box answers the chunk's vertices.
// The same holds for a level whose metadata has no vertex_count.
func TestUnlistedChunkInBoxIs503(t *testing.T) {
	t.Parallel()
	const box = "/api/v1/stores/g/bbox?level=0&min=301,201,501&max=399,299,599"
	for _, tc := range []struct {
		name    string
		changes []change
	}{
		{name: "vertex_count declared"},
		{name: "no vertex_count", changes: []change{edit("0/zarr.json", func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"vertex_count": 600,`, "", 1))
		})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sc := copyStore(t, "graph")
			sc.change(t, tc.changes...)
			fs := faultstore.New(zvftest.Store(t, sc.dir), nil)
			fs.Add(&faultstore.Rule{Op: "list", Fault: faultstore.Fault{Hide: "3.2.5"}})
			_, srv := handleServer(t, fs, zvf.Options{Name: "g", Cache: cache.New(64 << 20)}, zvf.Watch{Enabled: true, Settle: time.Second}, api.Options{})
			fs.Reset()
			code, hdr, body := serveFull(t, srv.Handler(), box)
			ra, _ := strconv.Atoi(hdr.Get("Retry-After"))
			if code != 503 || !strings.Contains(string(body), "store-changing") || !strings.Contains(string(body), "chunk 3.2.5 was not listed") ||
				!strings.Contains(string(body), "a box answer covering its cell") || ra < 1 {
				t.Fatalf("a box over chunk 3.2.5 left out of the listing: %d %v %.400s; want 503 store-changing naming the chunk and the listing, with Retry-After", code, hdr, body)
			}
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				code, hdr, body := serveFull(t, srv.Handler(), box)
				if code == 200 {
					if n := hdr.Get("X-Vertex-Count"); n != "1" || !strings.Contains(string(body), "[392.5104,278.44727,584.18445]") {
						t.Fatalf("the box once the store was listed again: %s vertices %.300s, want the chunk's vertex in the box", n, body)
					}
					break
				}
				if code != 503 || time.Now().After(deadline) {
					t.Fatalf("the box while the store is listed again: %d %.300s, want 503 then 200", code, body)
				}
			}
		})
	}
}

// TestBoxHolesAskedOnce: the cells a box covers that the level's listing
// lacks are asked for once a version, not on every answer: three answers
// of a box over 8 empty cells make 8 Stats, and are 200 with nothing. A
// box with more such cells than an answer asks for (the whole store: over
// 1,200) lists the level again instead, once.
func TestBoxHolesAskedOnce(t *testing.T) {
	t.Parallel()
	st := &statCounter{listCounter: listCounter{Store: zvftest.Store(t, fixtures+"/graph.zarrvectors")}}
	_, srv := handleServer(t, st, zvf.Options{Name: "g", Cache: cache.New(64 << 20)}, zvf.Watch{Enabled: true, Settle: settleTime}, api.Options{})
	const empty = "/api/v1/stores/g/bbox?level=0&min=0,0,0&max=199,199,199"
	for i := range 3 {
		if code, hdr, body := serveFull(t, srv.Handler(), empty); code != 200 || hdr.Get("X-Vertex-Count") != "0" {
			t.Fatalf("answer %d of a box over 8 empty cells: %d %.300s, want 200 and no vertices", i, code, body)
		}
	}
	if n := st.stats.Load(); n != 8 {
		t.Fatalf("3 answers of a box over 8 empty cells asked for %d cells, want 8", n)
	}
	lists := st.n.Load()
	const all = "/api/v1/stores/g/bbox?level=0&min=0,0,0&max=1000,1000,1000"
	for i := range 2 {
		if code, hdr, body := serveFull(t, srv.Handler(), all); code != 200 || hdr.Get("X-Number-Matched") != "600" {
			t.Fatalf("answer %d of the whole store: %d %v %.200s, want 200 and the 600 vertices", i, code, hdr, body)
		}
	}
	if n := st.n.Load() - lists; n != 1 {
		t.Fatalf("2 answers of the whole store listed level 0 %d times, want once", n)
	}
	if n := st.stats.Load(); n != 8 {
		t.Fatalf("the whole store's answers asked for %d cells, want none (they list instead)", n-8)
	}
	// The listing taken again agreed: a box over cells never asked about
	// is answered from it, with no Stat.
	const other = "/api/v1/stores/g/bbox?level=0&min=800,800,800&max=999,999,999"
	if code, _, body := serveFull(t, srv.Handler(), other); code != 200 {
		t.Fatalf("a box over unasked cells after the relisting: %d %.300s, want 200", code, body)
	}
	if n := st.stats.Load(); n != 8 {
		t.Fatalf("a box after a relisting that agreed asked for %d cells, want none", n-8)
	}
}

// statCounter counts, besides listings, the Stats of level 0's chunk
// documents.
type statCounter struct {
	listCounter
	stats atomic.Int64
}

// FoldersHolding lists as the store does (a Stat a folder would count).
func (c *statCounter) FoldersHolding(ctx context.Context, prefix, name string) ([]string, error) {
	if strings.HasPrefix(strings.TrimPrefix(prefix, "/"), "0/vertices") {
		c.n.Add(1)
	}
	return storage.FoldersHolding(ctx, c.Store, prefix, name)
}

func (c *statCounter) Stat(ctx context.Context, key string) (storage.Attrs, error) {
	if k := strings.TrimPrefix(key, "/"); strings.HasPrefix(k, "0/vertices/") && strings.HasSuffix(k, "/zarr.json") {
		c.stats.Add(1)
	}
	return c.listCounter.Stat(ctx, key)
}

// TestChunkNamedButAbsentStaysCorrupt: an object whose manifest names a
// chunk the store truly lacks is corrupt data, a 422, every time; the
// level is listed again for it once, not on every request.
func TestChunkNamedButAbsentStaysCorrupt(t *testing.T) {
	t.Parallel()
	sc := copyStore(t, "graph")
	sc.change(t, remove("0/vertices/3.2.5"))
	ls := &listCounter{Store: zvftest.Store(t, sc.dir)}
	_, srv := handleServer(t, ls, zvf.Options{Name: "g", Cache: cache.New(64 << 20)}, zvf.Watch{Enabled: true, Settle: settleTime}, api.Options{})
	before := ls.n.Load()
	for i := range 5 {
		code, _, body := serveFull(t, srv.Handler(), "/api/v1/stores/g/objects/1")
		if code != 422 || !strings.Contains(string(body), "corrupt-data") || !strings.Contains(string(body), "names chunk 3.2.5, which does not exist") {
			t.Fatalf("request %d for an object naming a chunk the store lacks: %d %.300s; want 422 corrupt-data naming the chunk", i, code, body)
		}
	}
	if n := ls.n.Load() - before; n > 1 {
		t.Fatalf("5 requests for the object listed the level's vertices %d times; want once at most", n)
	}
}

// listCounter counts the listings of level 0's vertex chunks.
type listCounter struct {
	storage.Store
	n atomic.Int64
}

func (c *listCounter) List(ctx context.Context, prefix string) (storage.Listing, error) {
	if strings.HasPrefix(strings.TrimPrefix(prefix, "/"), "0/vertices") {
		c.n.Add(1)
	}
	return c.Store.List(ctx, prefix)
}

// TestListingCheckThatCannotListServes: a level whose chunks hold fewer
// vertices than it declares is listed again once all were read; while the
// backend fails listings (GETs answering), that listing failed every
// answer that read a chunk afresh — a 502 for a store whose data are
// whole — and was asked again by each, a listing storm on a failing
// backend. Now the answer goes out (the level unchecked, as before the
// check), the failure is logged, and the listing is tried again only
// after a wait.
func TestListingCheckThatCannotListServes(t *testing.T) {
	t.Parallel()
	const path = "/api/v1/stores/g/count?level=0&min=-1e6,-1e6,-1e6&max=1e6,1e6,1e6"
	sc := copyStore(t, "graph")
	sc.change(t, edit("0/zarr.json", func(b []byte) []byte {
		return []byte(strings.Replace(string(b), `"vertex_count": 600`, `"vertex_count": 601`, 1))
	}))
	fs := faultstore.New(zvftest.Store(t, sc.dir), nil)
	ls := &listCounter{Store: &stillClock{Store: fs, at: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}}
	var logs syncBuf
	_, srv := handleServer(t, ls, zvf.Options{Name: "g", Cache: cache.New(64 << 20), Logger: slog.New(slog.NewTextHandler(&logs, nil))}, zvf.Watch{}, api.Options{})
	fs.Add(&faultstore.Rule{Op: "list", Fault: faultstore.Fault{Err: storage.ErrUnavailable}})
	countsWhileListingsFail(t, srv.Handler(), path, ls, &logs, "listing it again failed")
}

// countsWhileListingsFail asks h for path, a count of the graph's 600
// vertices, three times while every listing fails: each is 200 and the
// count, the level was listed once (then the listing waits), and the log
// says what failed.
func countsWhileListingsFail(t *testing.T, h http.Handler, path string, ls *listCounter, logs *syncBuf, said string) {
	t.Helper()
	before := ls.n.Load()
	for i := range 3 {
		if code, _, body := serveFull(t, h, path); code != 200 || strings.TrimSpace(string(body)) != `{"count":600}` {
			t.Fatalf("count %d while listings fail: %d %.300s; want 200 and 600", i, code, body)
		}
	}
	if n := ls.n.Load() - before; n != 1 {
		t.Errorf("3 counts while listings fail listed the level %d times; want once, then a wait", n)
	}
	if !strings.Contains(logs.String(), said) {
		t.Errorf("the log does not say the listing failed: %s", logs.String())
	}
}

// stillClock is a store whose clock stands still.
type stillClock struct {
	storage.Store
	at time.Time
}

func (c *stillClock) Now() time.Time { return c.at }

// syncBuf is a log sink safe for the server's goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
