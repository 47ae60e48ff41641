package api_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/faultstore"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// unlistedCase is an answer over a chunk that the listings taken while
// the store opens leave out (hide: a substring of its key or shard).
type unlistedCase struct {
	name, fixture string
	changes       []change
	hide, chunk   string // what the listing hides; the chunk the 503 names
	path          string
}

// checkUnlisted serves c.path from the store with c.hide left out of the
// listings taken as it opens (an object store's listing behind its
// writes) on a store that may change: the first answer must be a 503
// store-changing problem naming the chunk, with Retry-After; every later
// one that 503 or, once the store has been listed again, the answer the
// whole store gives — never the answer without the chunk.
func checkUnlisted(t *testing.T, c unlistedCase) {
	t.Helper()
	sc := copyStore(t, c.fixture)
	sc.change(t, c.changes...)
	opts := zvf.Options{Name: "g", Cache: cache.New(64 << 20)}
	_, whole := handleServer(t, zvftest.Store(t, sc.dir), opts, zvf.Watch{}, api.Options{})
	code, _, want := serveFull(t, whole.Handler(), c.path)
	if code != 200 {
		t.Fatalf("%s from the whole store: %d %.300s", c.path, code, want)
	}
	// The chunk matters to the answer: served as immutable (no check),
	// the store as listed answers otherwise.
	blindStore := faultstore.New(zvftest.Store(t, sc.dir), nil)
	blindStore.Add(&faultstore.Rule{Op: "list", Fault: faultstore.Fault{Hide: c.hide}})
	opts.Cache = cache.New(64 << 20)
	_, blind := handleServer(t, blindStore, opts, zvf.Watch{}, api.Options{})
	if code, _, body := serveFull(t, blind.Handler(), c.path); code == 200 && bytes.Equal(body, want) {
		t.Fatalf("%s without %s in the listing answers as the whole store does: the case shows nothing", c.path, c.hide)
	}
	fs := faultstore.New(zvftest.Store(t, sc.dir), nil)
	fs.Add(&faultstore.Rule{Op: "list", Fault: faultstore.Fault{Hide: c.hide}})
	opts.Cache = cache.New(64 << 20)
	_, srv := handleServer(t, fs, opts, zvf.Watch{Enabled: true, Settle: time.Second}, api.Options{})
	fs.Reset()
	code, hdr, body := serveFull(t, srv.Handler(), c.path)
	var p struct {
		Type, Detail string
		Status       int
	}
	_ = json.Unmarshal(body, &p)
	ra, _ := strconv.Atoi(hdr.Get("Retry-After"))
	if code != 503 || hdr.Get("Content-Type") != "application/problem+json" || p.Type != "https://zvfserve.dev/problems/store-changing" ||
		p.Status != 503 || !strings.Contains(p.Detail, "chunk "+c.chunk+" ") || !strings.Contains(p.Detail, "was not listed") || ra < 1 {
		t.Fatalf("%s with %s left out of the listing: %d %v %.500s; want 503 store-changing naming chunk %s and the listing, with Retry-After",
			c.path, c.hide, code, hdr, body, c.chunk)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		code, _, body := serveFull(t, srv.Handler(), c.path)
		if code == 200 {
			if !bytes.Equal(body, want) {
				t.Fatalf("%s once the store was listed again: %.500s; want the whole store's %.500s", c.path, body, want)
			}
			return
		}
		if code != 503 || !strings.Contains(string(body), c.chunk) || time.Now().After(deadline) {
			t.Fatalf("%s while the store is listed again: %d %.300s, want 503 naming %s, then 200", c.path, code, body, c.chunk)
		}
	}
}

// noVertexCount takes level 0's declared vertex_count out, so that no
// answer reading every listed chunk finds one missing by the count.
var noVertexCount = edit("0/zarr.json", func(b []byte) []byte {
	return regexp.MustCompile(`"vertex_count": [0-9]+,`).ReplaceAll(b, nil)
})

// TestUnlistedChunkInEveryAnswerIs503: a box over a chunk the level's
// listing lacks was a 503 only on /bbox; a count, a density, the level's
// chunk list, the chunk itself (a 404 "no chunk"), and Neuroglancer's
// spatial index and density volume answered without the chunk — quietly
// short — for as long as the server ran. Now each is the 503
// store-changing of an incomplete listing, and once the store has been
// listed again, the whole store's answer.
func TestUnlistedChunkInEveryAnswerIs503(t *testing.T) {
	t.Parallel()
	const graphBox = "level=0&min=301,201,501&max=399,299,599" // chunk 3.2.5 alone
	for _, c := range []unlistedCase{
		{name: "count", path: "/api/v1/stores/g/count?" + graphBox},
		{name: "density", path: "/api/v1/stores/g/density?shape=2,1,1&" + graphBox},
		{name: "chunk list", path: "/api/v1/stores/g/levels/0/chunks"},
		{name: "chunk", path: "/api/v1/stores/g/levels/0/chunks/3.2.5"},
		// The index reads every listed chunk: without a vertex_count the
		// listing check that follows cannot tell a chunk is missing.
		{name: "neuroglancer spatial cell", fixture: "points_bins", hide: "1.2.3", chunk: "1.2.3", path: "/ng/g/annotations/spatial0/1_2_3",
			changes: []change{noVertexCount}},
		{name: "neuroglancer density", fixture: "points_bins", hide: "1.2.3", chunk: "1.2.3", path: "/ng/g/density/0/0-20_0-20_0-20"},
		{name: "points count", fixture: "points_bins", hide: "1.2.3", chunk: "1.2.3", path: "/api/v1/stores/g/count?min=250,500,750&max=499,749,999"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if c.fixture == "" {
				c.fixture, c.hide, c.chunk = "graph", "3.2.5", "3.2.5"
			}
			checkUnlisted(t, c)
		})
	}
}

// TestUnlistedChunkWhereNoCellIsAsked: a box over a chunk the listing
// lacks, where its cell is not asked for one by one, was a 200 without
// the chunk's vertex for as long as the server ran: on a grid of more
// than 2^20 cells (the bounds say so; 48 chunks), past the store's
// declared bounds (the data reach past them), on a level chunked by
// attribute (a cell holds a chunk per value, unknown ahead), and on a
// level packed into __shard_ arrays (a hidden shard hides its chunks; a
// chunk there has no zarr.json of its own to ask for). Now such a box lists the level again
// (once a version), finds the chunk, and is the 503; then the whole
// store's answer.
func TestUnlistedChunkWhereNoCellIsAsked(t *testing.T) {
	t.Parallel()
	bounds := func(lo, hi string) change {
		return edit("zarr.json", func(b []byte) []byte {
			s := string(b)
			i := strings.Index(s, `"bounds"`)
			j := i + strings.Index(s[i:], "]\n      ]") + len("]\n      ]")
			return []byte(s[:i] + `"bounds": [` + lo + `, ` + hi + `]` + s[j:])
		})
	}
	for _, c := range []unlistedCase{
		// 2001 × 101 × 11 cells of 100.
		{name: "grid over 2^20 cells", fixture: "graph", hide: "3.2.5", chunk: "3.2.5",
			changes: []change{bounds("[0, 0, 0]", "[200000, 10000, 1000]")},
			path:    "/api/v1/stores/g/bbox?level=0&min=301,201,501&max=399,299,599"},
		// 4.1.6 is the only chunk of row y = 1; the bounds start at y = 200.
		{name: "past the bounds", fixture: "graph", hide: "4.1.6", chunk: "4.1.6",
			changes: []change{bounds("[0, 200, 0]", "[1000, 1000, 1000]")},
			path:    "/api/v1/stores/g/bbox?level=0&min=400,100,600&max=499,199,699"},
		{name: "past the bounds, count", fixture: "graph", hide: "4.1.6", chunk: "4.1.6",
			changes: []change{bounds("[0, 200, 0]", "[1000, 1000, 1000]")},
			path:    "/api/v1/stores/g/count?level=0&min=400,100,600&max=499,199,699"},
		// A cell holds a chunk per attribute value: 0.1.2.3 is cell 1.2.3's.
		{name: "chunked by attribute", fixture: "points_bins", hide: "0.1.2.3", chunk: "0.1.2.3",
			changes: []change{attributeChunked},
			path:    "/api/v1/stores/g/count?level=0&min=250,500,750&max=499,749,999"},
		// __shard_000028 holds chunk 5.3.2 alone.
		{name: "shard", fixture: "graph_sharded", hide: "__shard_000028", chunk: "5.3.2",
			path: "/api/v1/stores/g/bbox?level=0&min=500,300,200&max=599,399,299"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			checkUnlisted(t, c)
		})
	}
}

// attributeChunked makes level 0 of a points store chunked by attribute:
// every chunk C becomes 0.C, the one bin of chunk_attribute_values.
var attributeChunked = change{"0", func(t *testing.T, p string) {
	t.Helper()
	dirs := []string{"vertices", "vertex_fragments"}
	ents, err := os.ReadDir(filepath.Join(p, "vertex_attributes"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join("vertex_attributes", e.Name()))
		}
	}
	for _, d := range dirs {
		ents, err := os.ReadDir(filepath.Join(p, d))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.IsDir() {
				if err := os.Rename(filepath.Join(p, d, e.Name()), filepath.Join(p, d, "0."+e.Name())); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	edit("zarr.json", func(b []byte) []byte {
		return []byte(strings.Replace(string(b), `"level": 0,`, `"level": 0, "chunk_attribute_name": "label", "chunk_attribute_values": [0],`, 1))
	}).apply(t, p)
}}

// TestBoxRelistThatCannotListServes: a box reaching past the store's
// bounds has the level listed again; while the backend fails listings
// (its reads answering), that failed the box — an error for a store
// whose data are whole — and was asked again by every box, a listing
// storm on a failing backend. Now the box is answered as the open's
// listing has it, the failure is logged, and the level is listed again
// only after a wait.
func TestBoxRelistThatCannotListServes(t *testing.T) {
	t.Parallel()
	const path = "/api/v1/stores/g/count?level=0&min=-1e6,-1e6,-1e6&max=1e6,1e6,1e6"
	fs := faultstore.New(zvftest.Store(t, fixtures+"/graph.zarrvectors"), nil)
	ls := &listCounter{Store: &stillClock{Store: fs, at: time.Now().Add(time.Hour)}} // after the files were written; still, so no wait passes
	var logs syncBuf
	_, srv := handleServer(t, ls, zvf.Options{Name: "g", Cache: cache.New(64 << 20), Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		zvf.Watch{Enabled: true, Settle: time.Hour}, api.Options{})
	fs.Add(&faultstore.Rule{Op: "list", Key: "0/vertices", Fault: faultstore.Fault{Err: storage.ErrUnavailable}})
	countsWhileListingsFail(t, srv.Handler(), path, ls, &logs, "listing a level again for an answer failed")
}

// TestAbsentChunkAskedWhileAnotherIsUnlisted: a request for a chunk the
// store lacks (9.9.9) lists the level again; that listing found chunk
// 3.2.5, which the open's lacked, but as it was not the chunk asked for,
// the level was marked listed-again-and-agreeing: the 404 went out, and
// every box over 3.2.5 after it was a 200 without its vertex (the box
// check stood down). Now the listing that finds 3.2.5 makes the level's
// answers the 503 naming it, the request for 9.9.9 and the box alike.
func TestAbsentChunkAskedWhileAnotherIsUnlisted(t *testing.T) {
	t.Parallel()
	fs := faultstore.New(zvftest.Store(t, fixtures+"/graph.zarrvectors"), nil)
	fs.Add(&faultstore.Rule{Op: "list", Fault: faultstore.Fault{Hide: "3.2.5"}})
	_, srv := handleServer(t, fs, zvf.Options{Name: "g", Cache: cache.New(64 << 20)}, zvf.Watch{Enabled: true, Settle: time.Hour}, api.Options{})
	fs.Reset()
	for _, path := range []string{"/api/v1/stores/g/levels/0/chunks/9.9.9", "/api/v1/stores/g/bbox?level=0&min=301,201,501&max=399,299,599"} {
		code, _, body := serveFull(t, srv.Handler(), path)
		if code != 503 || !strings.Contains(string(body), "store-changing") || !strings.Contains(string(body), "chunk 3.2.5 was not listed") {
			t.Fatalf("%s while chunk 3.2.5 is left out of the listing: %d %.400s; want 503 store-changing naming 3.2.5", path, code, body)
		}
	}
}
