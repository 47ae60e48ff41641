package neuroglancer_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// pointStore writes n uniform points with a float and a categorical
// attribute over a 1000-cube in chunks of the given edge (bins a fifth of
// it), with a three-level pyramid or none, under prefix "points".
func pointStore(b testing.TB, n int, chunk float64, pyramid bool) storage.Store {
	b.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	pos := make([]float32, 3*n)
	inten := make([]float32, n)
	kinds := make([]string, n)
	for i := range n {
		for k := range 3 {
			pos[3*i+k] = float32(r.Float64() * 1000)
		}
		inten[i] = float32(r.NormFloat64())
		kinds[i] = []string{"a", "b", "c"}[r.IntN(3)]
	}
	st := zvftest.Store(b, "mem://")
	o := writer.Options{ChunkShape: []float64{chunk, chunk, chunk}, BinShape: []float64{chunk / 5, chunk / 5, chunk / 5}}
	if pyramid {
		o.Pyramid = []writer.PyramidLevel{{Coarsen: 2}, {Coarsen: 8}}
	}
	pc := &writer.PointCloud{Positions: pos, Attributes: []writer.Attribute{writer.Float32Attribute("intensity", 1, inten), writer.CategoricalAttribute("kind", kinds)}}
	if _, err := writer.WritePoints(ctx, st, "points", pc, o); err != nil {
		b.Fatal(err)
	}
	return storage.Sub(st, "points")
}

// cellStore: 80,000 points in chunks of 500, so eight level-0 cells of
// about 10,000 annotations each (no pyramid: one spatial level).
func cellStore(b *testing.B) storage.Store { return pointStore(b, 80_000, 500, false) }

func handlerFor(b *testing.B, st storage.Store, name string, ch *cache.Cache) http.Handler {
	b.Helper()
	s, err := zvf.Open(context.Background(), st, zvf.Options{Name: name, Cache: ch})
	if err != nil {
		b.Fatal(err)
	}
	srv := apitest.New(b, api.Options{Stores: []*zvf.Store{s}, Cache: ch})
	return srv.Handler()
}

// serveTimes serves path b.N times (after one warming request) and reports
// the median server time, the handler's time from request to last byte.
func serveTimes(b *testing.B, h http.Handler, path string, fresh func() http.Handler) {
	b.Helper()
	req := httptest.NewRequest(http.MethodGet, "http://x"+path, nil)
	if fresh == nil {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("%s: %d %s", path, w.Code, w.Body.Bytes())
		}
		b.SetBytes(int64(w.Body.Len()))
	}
	times := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if fresh != nil {
			b.StopTimer()
			h = fresh()
			b.StartTimer()
		}
		w := httptest.NewRecorder()
		t0 := time.Now()
		h.ServeHTTP(w, req)
		times = append(times, time.Since(t0))
		if w.Code != http.StatusOK {
			b.Fatalf("%s: %d", path, w.Code)
		}
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
}

// BenchmarkCellWarm10k: a cell of about 10,000 point annotations, warm
// (issue #16: p50 under 2 ms of server time).
func BenchmarkCellWarm10k(b *testing.B) {
	h := handlerFor(b, cellStore(b), "points", cache.New(256<<20))
	serveTimes(b, h, "/ng/points/annotations/spatial0/0_0_0", nil)
}

// BenchmarkCellCold10k: the same cell from a cold cache, which reads the
// whole 80,000-point level to build the spatial index first.
func BenchmarkCellCold10k(b *testing.B) {
	st := cellStore(b)
	serveTimes(b, nil, "/ng/points/annotations/spatial0/0_0_0", func() http.Handler { return handlerFor(b, st, "points", cache.New(256<<20)) })
}

// BenchmarkInfoCold2M: the first request of a 2,000,000-point store with a
// three-level pyramid in 512 chunks: the spatial index is built from every
// level-0 chunk.
func BenchmarkInfoCold2M(b *testing.B) {
	st := pointStore(b, 2_000_000, 125, true)
	serveTimes(b, nil, "/ng/points/annotations/info", func() http.Handler { return handlerFor(b, st, "points", cache.New(1<<30)) })
}

// BenchmarkSkeletonWarm: one of the demo's neuron skeletons, warm.
func BenchmarkSkeletonWarm(b *testing.B) {
	ch := cache.New(256 << 20)
	s := storeNamed(b, demoStores(b, ch), "skeletons")
	srv := apitest.New(b, api.Options{Stores: []*zvf.Store{s}, Cache: ch})
	serveTimes(b, srv.Handler(), "/ng/skeletons/skeletons/1", nil)
}

// BenchmarkMultilodBytes replays what Neuroglancer fetches to show every
// mesh of a mesh store (replayMeshView) and reports the bytes each mesh
// source sends, legacy against multilod: for the demo's meshes and the
// connectome store, at the view the store's ready state opens on, the
// store's box, in the browser test's panel (view=default, which the
// browser test checks against the real requests), and with every segment
// at one pixel size (px=…, store units per pixel as Neuroglancer reckons
// it: half a screen pixel, see meshView.pixel).
func BenchmarkMultilodBytes(b *testing.B) {
	ch := cache.New(256 << 20)
	demoMeshes := storeNamed(b, demoStores(b, ch), "meshes")
	for _, sc := range []struct {
		st  *zvf.Store
		pxs []float64
	}{
		{demoMeshes, []float64{0.75, 8, 64, 256}},
		{connectomeStore(b, ch), []float64{25, 50, 100, 200, 400}},
	} {
		srv := apitest.New(b, api.Options{Stores: []*zvf.Store{sc.st}, Cache: ch})
		h := srv.Handler()
		views := []meshView{stateMeshView(b, h, sc.st.Name())}
		for _, px := range sc.pxs {
			views = append(views, meshView{px: px})
		}
		for _, v := range views {
			b.Run(sc.st.Name()+"/"+v.String(), func(b *testing.B) {
				var legacy, multilod int64
				for range b.N {
					legacy, multilod = replayMeshView(b, h, sc.st, v)
				}
				b.ReportMetric(float64(legacy), "legacy-B")
				b.ReportMetric(float64(multilod), "multilod-B")
				b.ReportMetric(float64(legacy)/float64(multilod), "x-fewer")
			})
		}
	}
}

// BenchmarkAnnotationView1M: the requests Neuroglancer makes for an
// annotation view of a 1,000,000-point store (a three-level pyramid in
// chunks of 125, so 512 level-0 cells) at its default zoom, the whole box:
// the info, then every cell of every spatial level, unsharded (a GET per
// cell) or sharded (per minishard its shard-index entry and its index by
// Range, then a Range per cell), warm (the cache holds the plan, the
// cells and the shards) and cold (a new cache each time). It reports
// requests and bytes per view.
func BenchmarkAnnotationView1M(b *testing.B) {
	st := pointStore(b, 1_000_000, 125, true)
	for _, mode := range []neuroglancer.ShardMode{neuroglancer.ShardNever, neuroglancer.ShardAlways} {
		for _, warm := range []bool{true, false} {
			name := string(mode) + "/cold"
			if warm {
				name = string(mode) + "/warm"
			}
			b.Run(name, func(b *testing.B) {
				var h http.Handler
				fresh := func() {
					ch := cache.New(1 << 30)
					s, err := zvf.Open(context.Background(), st, zvf.Options{Name: "points", Cache: ch})
					if err != nil {
						b.Fatal(err)
					}
					srv := apitest.New(b, api.Options{Stores: []*zvf.Store{s}, Cache: ch, NGSharded: mode})
					h = srv.Handler()
				}
				var requests, sent atomic.Int64
				ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					requests.Add(1)
					sw := apitest.NewCountingWriter(w)
					h.ServeHTTP(sw, r)
					sent.Add(sw.N)
				}))
				b.Cleanup(ts.Close)
				fresh()
				if warm {
					annotationView(b, ts)
				}
				requests.Store(0)
				sent.Store(0)
				b.ResetTimer()
				for range b.N {
					if !warm {
						b.StopTimer()
						fresh()
						b.StartTimer()
					}
					annotationView(b, ts)
				}
				b.StopTimer()
				b.ReportMetric(float64(requests.Load())/float64(b.N), "requests/view")
				b.ReportMetric(float64(sent.Load())/float64(b.N), "bytes/view")
			})
		}
	}
}

// annotationView fetches what Neuroglancer needs to draw every cell of
// every spatial level of /ng/points/annotations.
func annotationView(b *testing.B, ts *httptest.Server) {
	base := "/ng/points/annotations"
	var si shardedInfo
	if err := json.Unmarshal(apitest.MustGet(b, ts, base+"/info"), &si); err != nil {
		b.Fatal(err)
	}
	for _, sp := range si.Spatial {
		var c *shardClient
		if len(sp.Sharding) > 0 {
			c = newShardClient(b, ts, base+"/"+sp.Key, sp.Sharding)
			c.rangesOnly = true
		}
		n := 1
		for _, v := range sp.GridShape {
			n *= v
		}
		pos := make([]int, len(sp.GridShape))
		for range n {
			if c != nil {
				c.get(zOrder(pos, sp.GridShape))
			} else {
				apitest.MustGet(b, ts, fmt.Sprintf("%s/%s/%d_%d_%d", base, sp.Key, pos[0], pos[1], pos[2]))
			}
			for i := range pos {
				if pos[i]++; pos[i] < sp.GridShape[i] {
					break
				}
				pos[i] = 0
			}
		}
	}
}

// BenchmarkShardRangeLargerThanCache: Neuroglancer's Range reads of a
// spatial shard file larger than the cache (200,000 points in 64 cells,
// one shard of about 3 MB; a 2 MiB cache that keeps the spatial index but
// not the shard): the shard index it reads first, then one cell.
func BenchmarkShardRangeLargerThanCache(b *testing.B) {
	ch := cache.New(2 << 20)
	s, err := zvf.Open(context.Background(), pointStore(b, 200_000, 250, false), zvf.Options{Name: "points", Cache: ch})
	if err != nil {
		b.Fatal(err)
	}
	h := apitest.New(b, api.Options{Stores: []*zvf.Store{s}, Cache: ch, NGSharded: neuroglancer.ShardAlways}).Handler()
	var inf struct {
		Spatial []struct {
			Key      string `json:"key"`
			Sharding struct {
				MinishardBits uint64 `json:"minishard_bits"`
			} `json:"sharding"`
		} `json:"spatial"`
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/ng/points/annotations/info", nil))
	if err := json.Unmarshal(w.Body.Bytes(), &inf); err != nil || len(inf.Spatial) != 1 {
		b.Fatalf("info: %v %s", err, w.Body.Bytes())
	}
	path := "/ng/points/annotations/" + inf.Spatial[0].Key + "/0.shard"
	get := func(rng string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Range", rng)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusPartialContent {
			b.Fatalf("%s %s: %d %.300s", path, rng, w.Code, w.Body.Bytes())
		}
		return w
	}
	body := uint64(16) << inf.Spatial[0].Sharding.MinishardBits // offsets count from the shard index's end
	idx := get("bytes=0-15").Body.Bytes()                       // minishard 0's index: its start and end
	lo, hi := binary.LittleEndian.Uint64(idx), binary.LittleEndian.Uint64(idx[8:])
	if hi <= lo {
		b.Fatalf("minishard 0 is empty: %x", idx)
	}
	// The minishard index (gzip): key deltas, start deltas, sizes; its
	// first chunk starts at the first start delta.
	zr, err := gzip.NewReader(bytes.NewReader(get(fmt.Sprintf("bytes=%d-%d", body+lo, body+hi-1)).Body.Bytes()))
	if err != nil {
		b.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil || len(raw) < 24 || len(raw)%24 != 0 {
		b.Fatalf("minishard index: %v, %d bytes", err, len(raw))
	}
	n := len(raw) / 24
	start, size := binary.LittleEndian.Uint64(raw[8*n:]), binary.LittleEndian.Uint64(raw[16*n:])
	for _, c := range []struct{ name, rng string }{
		{"shard-index", "bytes=0-15"},
		{"minishard-index", fmt.Sprintf("bytes=%d-%d", body+lo, body+hi-1)},
		{"cell", fmt.Sprintf("bytes=%d-%d", body+start, body+start+size-1)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				get(c.rng)
			}
		})
	}
}

// BenchmarkPlanLargerThanCache: requests of a cell of a source whose
// spatial index (about 4 MB, 50,000 polylines) is larger than the whole
// cache (2 MiB), after the first. Each was answered by building the index
// again from every object's manifest; now the first request finds it too
// large for the cache and every later one is a 413 naming --cache-bytes,
// at once.
func BenchmarkPlanLargerThanCache(b *testing.B) {
	st := gridPolylines(b, 50_000, 64<<20)
	h := neuroglancer.New(neuroglancer.Options{Store: func(*http.Request) (*zvf.Store, error) { return st, nil },
		Cache: cache.New(2 << 20), Sharded: neuroglancer.ShardNever,
		Serve: func(f func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				if err := f(w, r); err != nil {
					w.WriteHeader(http.StatusRequestEntityTooLarge)
					_, _ = io.WriteString(w, err.Error())
				}
			}
		},
		NotModified: func(http.ResponseWriter, *http.Request, string) bool { return false }})
	r := chi.NewRouter()
	r.Route("/ng/{store}", h.Routes)
	get := func() {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/ng/scale/annotations/spatial0/0_0_0", nil))
		if w.Code != http.StatusOK && w.Code != http.StatusRequestEntityTooLarge {
			b.Fatalf("%d %.300s", w.Code, w.Body.Bytes())
		}
	}
	get() // the first request of the store version builds the index
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		get()
	}
}
