package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/web"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/demo"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

func demoServer(t *testing.T, token string) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(newDemo(t, false).handler(t, token))
	t.Cleanup(ts.Close)
	return ts
}

// demoStores are the demo's four stores (and, for the browser tests, a
// 2-million-point store, a store whose one chunk is damaged and one that
// does not open), opened once and served by as many handlers as a test
// needs.
type demoStores struct {
	scene   *demo.Scene
	stores  []*zvf.Store
	handles []*zvf.Handle
	cache   *cache.Cache
}

// memStorage is an in-memory bucket, closed when the test ends.
func memStorage(t *testing.T) storage.Writer {
	t.Helper()
	mem := zvftest.Store(t, "mem://")
	return mem
}

// pointsServer serves the viewer and one store, name, written from pc in
// chunks of chunk units a side, on an in-memory bucket.
func pointsServer(t *testing.T, name string, pc *writer.PointCloud, chunk float64) *httptest.Server {
	t.Helper()
	return pointsServerWith(t, name, pc, writer.Options{ChunkShape: []float64{chunk, chunk, chunk}})
}

// pointsServerWith is pointsServer with the writer's options (a pyramid).
func pointsServerWith(t *testing.T, name string, pc *writer.PointCloud, o writer.Options) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	mem := memStorage(t)
	if _, err := writer.WritePoints(ctx, mem, name, pc, o); err != nil {
		t.Fatal(err)
	}
	c := cache.New(16 << 20)
	s, err := zvf.Open(ctx, storage.Sub(mem, name), zvf.Options{Name: name, Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	srv := apitest.New(t, api.Options{Stores: []*zvf.Store{s}, Cache: c, UI: web.Handler(web.Options{})})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

func newDemo(t *testing.T, extra bool) *demoStores {
	t.Helper()
	ctx := context.Background()
	mem := memStorage(t)
	o := demo.Options{Seed: 1, Scale: 1}
	infos, err := demo.Build(ctx, mem, o)
	if err != nil {
		t.Fatal(err)
	}
	d := &demoStores{cache: cache.New(512 << 20)}
	if d.scene, err = demo.Generate(o); err != nil {
		t.Fatal(err)
	}
	open := func(st storage.Store, name string) {
		s, err := zvf.Open(ctx, st, zvf.Options{Name: name, Cache: d.cache})
		if err != nil {
			t.Fatal(err)
		}
		d.stores = append(d.stores, s)
	}
	for _, in := range infos {
		open(storage.Sub(mem, in.Prefix), in.Name)
	}
	if !extra {
		return d
	}
	// damaged: the cells with one level-0 chunk (x, y ≥ 750, z ≥ 500)
	// cut short, so the tile over it fails and the rest draws.
	err = mem.Walk(ctx, "cells/", func(key string, _ storage.Attrs) error {
		b, err := storage.ReadAll(ctx, mem, key, 64<<20)
		if err != nil {
			return err
		}
		if strings.HasSuffix(key, "0/vertices/3.3.2/c/0") {
			b = b[:7]
		}
		return mem.Put(ctx, "damaged/"+strings.TrimPrefix(key, "cells/"), b)
	})
	if err != nil {
		t.Fatal(err)
	}
	open(storage.Sub(mem, "damaged"), "damaged")
	// broken: metadata that is not JSON; it is listed with its problem.
	if err := mem.Put(ctx, "broken/zarr.json", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	h, err := zvf.OpenHandle(ctx, storage.Sub(mem, "broken"), zvf.Options{Name: "broken", Cache: d.cache}, zvf.Watch{})
	if err != nil {
		t.Fatal(err)
	}
	d.handles = append(d.handles, h)
	pts, err := synth.Points(ctx, 2_000_000, 1, writer.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pts.Close() })
	open(storage.Sub(pts, "points"), "points")
	// lattice: points every 25 units, so thousands lie exactly on the
	// faces the viewer's tiles share.
	var lat []float32
	for x := 0; x <= 1000; x += 25 {
		for y := 0; y <= 1000; y += 25 {
			for z := 0; z <= 1000; z += 25 {
				lat = append(lat, float32(x), float32(y), float32(z))
			}
		}
	}
	if _, err := writer.WritePoints(ctx, mem, "lattice", &writer.PointCloud{Positions: lat}, writer.Options{ChunkShape: []float64{125, 125, 125},
		BinShape: []float64{25, 25, 25}, Pyramid: []writer.PyramidLevel{{Coarsen: 2}, {Coarsen: 8}}}); err != nil {
		t.Fatal(err)
	}
	open(storage.Sub(mem, "lattice"), "lattice")
	return d
}

func (d *demoStores) handler(t *testing.T, token string) http.Handler {
	t.Helper()
	srv := apitest.New(t, api.Options{Stores: d.stores, Handles: d.handles, Cache: d.cache, UI: web.Handler(web.Options{}), Token: token})
	return srv.Handler()
}

// served is one request the test server answered.
type served struct {
	uri   string
	bytes int
}

// logged records the requests a handler answers, so tests see what the
// page asked for from the server's side. While gate is set, level-0 bbox
// requests of the points store wait for it to close, or for the client
// to give up (counted in cancelled, with their boxes). changed is closed
// (and replaced) at every change of log or cancelled, so a test waits for
// the server's side of something without polling.
type logged struct {
	h         http.Handler
	mu        sync.Mutex
	log       []served
	gate      chan struct{}
	cancelled []string
	changed   chan struct{}
}

func newLogged(h http.Handler) *logged { return &logged{h: h, changed: make(chan struct{})} }

// note wakes the waiters; l.mu is held.
func (l *logged) note() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// waitFor waits until ok holds of the requests answered and those seen
// cancelled, or until d has passed (false).
func (l *logged) waitFor(d time.Duration, ok func(log []served, cancelled []string) bool) bool {
	timeout := time.After(d)
	for {
		l.mu.Lock()
		done, ch := ok(l.log, l.cancelled), l.changed
		l.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-ch:
		case <-timeout:
			return false
		}
	}
}

func (l *logged) hold(t *testing.T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gate = make(chan struct{})
	t.Cleanup(l.release)
}

func (l *logged) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gate != nil {
		close(l.gate)
		l.gate = nil
	}
}

func (l *logged) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	gate := l.gate
	l.mu.Unlock()
	if gate != nil && route(r.URL.Path) == "/api/v1/stores/points/bbox" && r.URL.Query().Get("level") == "0" {
		select {
		case <-gate:
		case <-r.Context().Done():
			l.mu.Lock()
			l.cancelled = append(l.cancelled, r.URL.RequestURI())
			l.note()
			l.mu.Unlock()
			return
		}
	}
	cw := apitest.NewCountingWriter(w)
	// Identity on the wire, so the bytes the server writes are the bytes
	// the page counts (the browser decodes zstd and gzip before the page
	// sees a body; the api tests cover the codings).
	r.Header.Del("Accept-Encoding")
	l.h.ServeHTTP(cw, r)
	l.mu.Lock()
	l.log = append(l.log, served{r.URL.RequestURI(), int(cw.N)})
	l.note()
	l.mu.Unlock()
}

// since returns the requests answered after the first n.
func (l *logged) since(n int) []served {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]served(nil), l.log[n:]...)
}

func (l *logged) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.log)
}

// bboxReq is a bbox request the server answered, parsed.
type bboxReq struct {
	store    string
	level    string
	min, max [3]float64
	bytes    int
}

// versionSegment is the store version a data path names after its
// store (the viewer asks under the version its descriptor names).
var versionSegment = regexp.MustCompile(`^(/api/v1/stores/[^/]+)/v[0-9a-f]*/`)

// route is path without the store version it names, if any: the route
// the faults and logs of these tests speak of.
func route(path string) string { return versionSegment.ReplaceAllString(path, "$1/") }

func bboxRequests(t *testing.T, log []served) []bboxReq {
	t.Helper()
	var out []bboxReq
	for _, s := range log {
		u, err := url.Parse(s.uri)
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(route(u.Path), "/")
		if len(parts) != 6 || parts[5] != "bbox" {
			continue
		}
		q := u.Query()
		r := bboxReq{store: parts[4], level: q.Get("level"), bytes: s.bytes}
		for i, v := range strings.Split(q.Get("min"), ",") {
			r.min[i], _ = strconv.ParseFloat(v, 64)
		}
		for i, v := range strings.Split(q.Get("max"), ",") {
			r.max[i], _ = strconv.ParseFloat(v, 64)
		}
		out = append(out, r)
	}
	return out
}

func sumBytes(log []served) (n int) {
	for _, s := range log {
		n += s.bytes
	}
	return n
}

// unboundedStore is a store whose metadata declares no bounds: n points
// every 40 units over [0, 1000]³, one level, in 250-unit chunks.
func unboundedStore(t *testing.T) (s *zvf.Store, n int) {
	t.Helper()
	ctx := context.Background()
	mem := memStorage(t)
	var pos []float32
	for x := 0; x <= 1000; x += 40 {
		for y := 0; y <= 1000; y += 40 {
			for z := 0; z <= 1000; z += 40 {
				pos = append(pos, float32(x), float32(y), float32(z))
			}
		}
	}
	if _, err := writer.WritePoints(ctx, mem, "unbounded", &writer.PointCloud{Positions: pos}, writer.Options{ChunkShape: []float64{250, 250, 250}}); err != nil {
		t.Fatal(err)
	}
	b, err := storage.ReadAll(ctx, mem, "unbounded/zarr.json", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	zv, ok := doc["attributes"].(map[string]any)["zarr_vectors"].(map[string]any)
	if !ok || zv["bounds"] == nil {
		t.Fatalf("unbounded/zarr.json has no zarr_vectors bounds to take out: %s", b)
	}
	delete(zv, "bounds")
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := mem.Put(ctx, "unbounded/zarr.json", b); err != nil {
		t.Fatal(err)
	}
	s = zvftest.OpenSub(t, mem, "unbounded", nil)
	if bd := s.Info().Bounds; bd[0] != nil || bd[1] != nil {
		t.Fatalf("the store still declares bounds %v", bd)
	}
	return s, len(pos) / 3
}
