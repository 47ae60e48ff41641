package neuroglancer_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/api/neuroglancer/sharding"
	"github.com/zvfserve/zvfserve/api/neuroglancer/sharding/shardingtest"
	"github.com/zvfserve/zvfserve/api/problem"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// An independent client of sharded sources (shardingtest's reader): it
// reads a key as Neuroglancer does, with three Range requests (shard
// index entry, minishard index, chunk), each of which must be a 206 with
// the Content-Range asked for.

// shardClient reads keys of one sharded source at dir (a path on ts).
type shardClient struct {
	t     testing.TB
	ts    *httptest.Server
	dir   string
	s     shardingtest.Spec
	mu    sync.Mutex
	mini  map[[2]uint64][]shardingtest.Entry // by (shard, minishard)
	files map[string][]byte
	// rangesOnly reads as Neuroglancer does, every read a Range request,
	// no file fetched whole.
	rangesOnly bool
}

// rangeGet fetches [lo, hi) of path: nil for a missing file (404).
func (c *shardClient) rangeGet(path string, lo, hi uint64) []byte {
	c.t.Helper()
	resp, body := apitest.Get(c.t, c.ts, path, "Range", fmt.Sprintf("bytes=%d-%d", lo, hi-1), "Accept-Encoding", "gzip, zstd")
	if resp.StatusCode == http.StatusNotFound {
		return nil
	}
	cr := resp.Header.Get("Content-Range")
	if resp.StatusCode != http.StatusPartialContent || !strings.HasPrefix(cr, fmt.Sprintf("bytes %d-%d/", lo, hi-1)) ||
		resp.Header.Get("Content-Encoding") != "" || uint64(len(body)) != hi-lo {
		c.t.Fatalf("%s bytes %d-%d: %d, Content-Range %q, %d bytes: %.200s", path, lo, hi-1, resp.StatusCode, cr, len(body), body)
	}
	return body
}

// file returns a shard file (nil: missing), fetched whole once; each read
// of it below is checked once per minishard against a Range request.
func (c *shardClient) file(path string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.files[path]; ok {
		return b
	}
	resp, body := apitest.Get(c.t, c.ts, path)
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		body = nil
	default:
		c.t.Helper()
		c.t.Fatalf("%s: %d %.200s", path, resp.StatusCode, body)
	}
	c.files[path] = body
	return body
}

// read is [lo, hi) of a shard file, which must be there; ranged, it is
// also fetched by a Range request, which must give the same bytes.
func (c *shardClient) read(path string, file []byte, lo, hi uint64, ranged bool) []byte {
	if c.rangesOnly {
		return c.rangeGet(path, lo, hi)
	}
	if lo > hi || hi > uint64(len(file)) {
		c.t.Helper()
		c.t.Fatalf("%s: [%d, %d) of a %d-byte file", path, lo, hi, len(file))
	}
	if ranged && !bytes.Equal(c.rangeGet(path, lo, hi), file[lo:hi]) {
		c.t.Helper()
		c.t.Fatalf("%s: a Range request of [%d, %d) differs from the file's bytes", path, lo, hi)
	}
	return file[lo:hi]
}

// get returns key's chunk, or ok=false when the source has no such key.
// get, read and file run per chunk: they call t.Helper (a stack walk)
// only on failure.
func (c *shardClient) get(key uint64) (data []byte, ok bool) {
	s := c.s
	shard, name, minishard := s.Locate(key)
	path := c.dir + "/" + name
	var file []byte
	if !c.rangesOnly {
		if file = c.file(path); file == nil {
			return nil, false // a missing shard is an empty one
		}
	}
	indexEnd := s.IndexEnd()
	c.mu.Lock()
	entries, seen := c.mini[[2]uint64{shard, minishard}]
	c.mu.Unlock()
	first := !seen
	if first {
		pair := c.read(path, file, 16*minishard, 16*minishard+16, true)
		if pair == nil {
			return nil, false // rangesOnly: a missing shard
		}
		start, end := binary.LittleEndian.Uint64(pair), binary.LittleEndian.Uint64(pair[8:])
		if start < end {
			var err error
			if entries, err = s.Minishard(c.read(path, file, indexEnd+start, indexEnd+end, true)); err != nil {
				c.t.Helper()
				c.t.Fatalf("%s: minishard %d index: %v", path, minishard, err)
			}
		}
		c.mu.Lock()
		c.mini[[2]uint64{shard, minishard}] = entries
		c.mu.Unlock()
	}
	for _, e := range entries {
		if e.Key != key {
			continue
		}
		data, err := s.Chunk(c.read(path, file, e.Start, e.Start+e.Size, first))
		if err != nil {
			c.t.Helper()
			c.t.Fatalf("%s: key %d: %v", path, key, err)
		}
		return data, true
	}
	return nil, false
}

// shardFiles counts the shard files read that exist.
func (c *shardClient) shardFiles() int {
	n := 0
	for _, b := range c.files {
		if b != nil {
			n++
		}
	}
	return n
}

func newShardClient(t testing.TB, ts *httptest.Server, dir string, raw json.RawMessage) *shardClient {
	t.Helper()
	s, err := shardingtest.ParseSpec(raw)
	if err != nil {
		t.Fatalf("%s: sharding %s: %v", dir, raw, err)
	}
	return &shardClient{t: t, ts: ts, dir: dir, s: s, mini: map[[2]uint64][]shardingtest.Entry{}, files: map[string][]byte{}}
}

// zOrder is Neuroglancer's compressed Morton code of grid position pos
// over a grid of shape: bit b of each axis that needs it, b from 0.
func zOrder(pos []int, shape []int) uint64 {
	need := make([]int, len(shape))
	most := 0
	for i, n := range shape {
		need[i] = bits.Len(uint(max(n, 1) - 1))
		most = max(most, need[i])
	}
	var code uint64
	j := 0
	for b := range most {
		for i := range pos {
			if b < need[i] {
				code |= uint64(pos[i]>>b&1) << j
				j++
			}
		}
	}
	return code
}

// shardedInfo is what the test reads of a sharded annotation info.
type shardedInfo struct {
	ByID struct {
		Key      string          `json:"key"`
		Sharding json.RawMessage `json:"sharding"`
	} `json:"by_id"`
	Spatial []struct {
		Key       string          `json:"key"`
		GridShape []int           `json:"grid_shape"`
		Sharding  json.RawMessage `json:"sharding"`
	} `json:"spatial"`
}

// withoutSharding is an info document with every "sharding" member
// removed, re-encoded.
func withoutSharding(t testing.TB, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	var strip func(any)
	strip = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			delete(x, "sharding")
			for _, e := range x {
				strip(e)
			}
		case []any:
			for _, e := range x {
				strip(e)
			}
		}
	}
	strip(v)
	out, _ := json.Marshal(v)
	return string(out)
}

// TestShardedSourcesMatchUnsharded: with --ng-sharded=always every
// annotation source's info shards each spatial level and by_id and the
// skeleton info shards the skeletons; read through the shard files by an
// independent client, every cell, every annotation's by_id record and
// every skeleton is byte-equal to the unsharded answer, and a key the
// unsharded source lacks (an empty cell) is in no shard. With never (and
// auto, for these small stores) no info has "sharding".
func TestShardedSourcesMatchUnsharded(t *testing.T) {
	t.Parallel()
	stores := append(append(fixtureStores(t), largeIDStores(t)...), hugeIDStores(t)...)
	ch := cache.New(256 << 20)
	_, plain := newServer(t, api.Options{Stores: stores, Cache: ch, NGSharded: neuroglancer.ShardNever})
	_, auto := newServer(t, api.Options{Stores: stores, Cache: ch})
	_, sharded := newServer(t, api.Options{Stores: stores, Cache: ch, NGSharded: neuroglancer.ShardAlways})
	// Shards aimed at 64 KiB: the same stores in many shards and minishards.
	many := smallShardServer(t, stores, 64<<10)
	// Both sharded servers are read in one walk of each source, so that
	// each unsharded answer is fetched once.
	servers := map[string]*httptest.Server{"one shard": sharded, "many shards": many}
	var mu sync.Mutex
	checked := map[string]int{}
	count := func(what string, n int, files map[string]int) {
		mu.Lock()
		defer mu.Unlock()
		checked[what] += n
		for name, f := range files {
			checked[name+" files"] += f
		}
	}
	// The sources run in parallel (one after another they were
	// neuroglancer's longest test); the group ends when all have.
	t.Run("sources", func(t *testing.T) {
		for _, st := range stores {
			for _, route := range neuroglancer.RoutesOf(st) {
				base := "/ng/" + st.Name() + "/" + route
				switch route {
				case "annotations", "lines":
					t.Run(st.Name()+"/"+route, func(t *testing.T) {
						t.Parallel()
						n, files := checkShardedAnnotations(t, plain, auto, servers, base)
						count("cells", n, files)
						count("sources", 1, nil)
					})
				case "skeletons":
					t.Run(st.Name()+"/"+route, func(t *testing.T) {
						t.Parallel()
						n, files := checkShardedSkeletons(t, st, plain, servers, base)
						count("skeletons", n, files)
					})
				}
			}
		}
	})
	t.Logf("checked %v", checked)
	if checked["sources"] < 12 || checked["cells"] == 0 || checked["skeletons"] == 0 || checked["many shards files"] < 2*checked["one shard files"] {
		t.Fatalf("too little checked: %v", checked)
	}
}

// smallShardServer serves stores' Neuroglancer routes, sharded always,
// with shards aimed at target bytes.
func smallShardServer(t testing.TB, stores []*zvf.Store, target int64) *httptest.Server {
	o := neuroglancer.Options{Sharded: neuroglancer.ShardAlways, Cache: cache.New(64 << 20)}
	o.Store = func(r *http.Request) (*zvf.Store, error) { return storeNamed(t, stores, chi.URLParam(r, "store")), nil }
	return serveRoutes(t, o, func(o neuroglancer.Options) *neuroglancer.Server { return neuroglancer.NewSmallShards(o, target) })
}

// sampleEvery: the ids whose by_id answers are compared whole.
const sampleEvery = 61

// checkShardedAnnotations returns the cells it compared and, by server,
// the shard files it read.
func checkShardedAnnotations(t *testing.T, plain, auto *httptest.Server, servers map[string]*httptest.Server, base string) (int, map[string]int) {
	unshardedInfo := apitest.MustGet(t, plain, base+"/info")
	if strings.Contains(string(unshardedInfo), `"sharding"`) || !bytes.Equal(apitest.MustGet(t, auto, base+"/info"), unshardedInfo) {
		t.Fatalf("an unsharded info has sharding: %s", unshardedInfo)
	}
	inf, err := parseInfo(unshardedInfo)
	if err != nil {
		t.Fatal(err)
	}
	// Each server's by_id client and, by spatial level, its cell client.
	type sharded struct {
		name  string
		byID  *shardClient
		cells []*shardClient
	}
	var all []sharded
	var spatial []struct {
		key   string
		shape []int
	}
	for name, ts := range servers {
		infoBytes := apitest.MustGet(t, ts, base+"/info")
		if got, want := withoutSharding(t, infoBytes), withoutSharding(t, unshardedInfo); got != want {
			t.Fatalf("%s: the sharded info differs beyond sharding:\n%s\n%s", name, got, want)
		}
		var si shardedInfo
		if err := json.Unmarshal(infoBytes, &si); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(si.ByID.Key, "/by_id") || len(si.ByID.Sharding) == 0 || len(si.Spatial) == 0 {
			t.Fatalf("%s: sharded info: %s", name, infoBytes)
		}
		sh := sharded{name: name, byID: newShardClient(t, ts, base+"/"+si.ByID.Key, si.ByID.Sharding)}
		for _, sp := range si.Spatial {
			if len(sp.Sharding) == 0 {
				t.Fatalf("%s: %s has no sharding: %s", name, sp.Key, infoBytes)
			}
			sh.cells = append(sh.cells, newShardClient(t, ts, base+"/"+sp.Key, sp.Sharding))
		}
		all = append(all, sh)
		if spatial == nil { // the same in every server: the infos agree beyond sharding
			for _, sp := range si.Spatial {
				spatial = append(spatial, struct {
					key   string
					shape []int
				}{sp.Key, sp.GridShape})
			}
		}
	}
	cells, sampled := 0, 0
	for level, sp := range spatial {
		n := 1
		for _, v := range sp.shape {
			n *= v
		}
		if n > 1<<14 {
			t.Fatalf("%s: grid %v is too large to walk", sp.key, sp.shape)
		}
		pos := make([]int, len(sp.shape))
		for range n {
			names := make([]string, len(pos))
			for i, v := range pos {
				names[i] = strconv.Itoa(v)
			}
			want := apitest.MustGet(t, plain, base+"/"+sp.key+"/"+strings.Join(names, "_"))
			list, err := inf.decodeList(want)
			if err != nil {
				t.Fatal(err)
			}
			for _, sh := range all {
				got, ok := sh.cells[level].get(zOrder(pos, sp.shape))
				switch {
				case !ok && len(list) != 0:
					t.Fatalf("%s: %s cell %v (%d annotations) is in no shard", sh.name, sp.key, pos, len(list))
				case ok && !bytes.Equal(got, want):
					t.Fatalf("%s: %s cell %v: the shard's %d bytes differ from the cell's %d", sh.name, sp.key, pos, len(got), len(want))
				}
			}
			if len(list) > 0 {
				cells++
			}
			for _, a := range list {
				// Every annotation's sharded by_id record is its cell's
				// record; one in sampleEvery is also byte-equal to the
				// unsharded by_id answer (relationship included).
				var whole []byte
				if a.ID%sampleEvery == 0 {
					whole = apitest.MustGet(t, plain, base+"/by_id/"+strconv.FormatUint(a.ID, 10))
					sampled++
				}
				for _, sh := range all {
					got, ok := sh.byID.get(a.ID)
					if !ok {
						t.Fatalf("%s: by_id %d is in no shard", sh.name, a.ID)
					}
					one, err := inf.decodeByID(got, a.ID)
					if err != nil || !bytes.Equal(one.Raw, a.Raw) {
						t.Fatalf("%s: by_id %d: %v; record %x, the cell's %x", sh.name, a.ID, err, one.Raw, a.Raw)
					}
					if whole != nil && !bytes.Equal(got, whole) {
						t.Fatalf("%s: by_id %d: shard has %x, unsharded %x", sh.name, a.ID, got, whole)
					}
				}
			}
			for i := range pos { // next grid position
				if pos[i]++; pos[i] < sp.shape[i] {
					break
				}
				pos[i] = 0
			}
		}
	}
	files := map[string]int{}
	for _, sh := range all {
		if _, ok := sh.byID.get(1 << 62); ok {
			t.Fatalf("%s: by_id holds an annotation the source lacks", sh.name)
		}
		files[sh.name] = sh.byID.shardFiles()
		for _, c := range sh.cells {
			files[sh.name] += c.shardFiles()
		}
	}
	if cells > 0 && sampled == 0 {
		t.Fatal("no by_id record compared with the unsharded one")
	}
	return cells, files
}

// checkShardedSkeletons returns the skeletons it compared and, by
// server, the shard files it read.
func checkShardedSkeletons(t *testing.T, st *zvf.Store, plain *httptest.Server, servers map[string]*httptest.Server, base string) (int, map[string]int) {
	unshardedInfo := apitest.MustGet(t, plain, base+"/info")
	clients := map[string]*shardClient{}
	var skel ngSkeletonInfo
	for name, ts := range servers {
		infoBytes := apitest.MustGet(t, ts, base+"/info")
		if strings.Contains(string(unshardedInfo), `"sharding"`) || withoutSharding(t, infoBytes) != withoutSharding(t, unshardedInfo) {
			t.Fatalf("%s: skeleton infos:\n%s\n%s", name, infoBytes, unshardedInfo)
		}
		var inf struct {
			Sharding json.RawMessage `json:"sharding"`
		}
		if err := json.Unmarshal(infoBytes, &inf); err != nil || len(inf.Sharding) == 0 {
			t.Fatalf("%s: sharded skeleton info: %s", name, infoBytes)
		}
		if err := json.Unmarshal(infoBytes, &skel); err != nil {
			t.Fatal(err)
		}
		clients[name] = newShardClient(t, ts, base, inf.Sharding)
	}
	l0, err := st.Level(0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for row := range l0.Info().ObjectCount {
		id, err := l0.ObjectIDAt(context.Background(), row)
		if err != nil {
			t.Fatal(err)
		}
		resp, want := apitest.Get(t, plain, base+"/"+strconv.FormatUint(uint64(id), 10))
		for name, c := range clients {
			got, ok := c.get(uint64(id))
			if resp.StatusCode == http.StatusNotFound {
				if ok {
					t.Fatalf("%s: object %d has no skeleton, but a shard holds one", name, id)
				}
				continue
			}
			if !ok || !bytes.Equal(got, want) {
				t.Fatalf("%s: skeleton %d: shard has %v (%d bytes), unsharded %d bytes", name, id, ok, len(got), len(want))
			}
		}
		if resp.StatusCode == http.StatusNotFound {
			continue
		}
		if _, err := decodeSkeleton(&skel, want); err != nil {
			t.Fatalf("skeleton %d: %v", id, err)
		}
		n++
	}
	files := map[string]int{}
	for name, c := range clients {
		files[name] = c.shardFiles()
	}
	return n, files
}

// TestShardFiles: the names a sharded source has, Range answers on them,
// and what is not there.
func TestShardFiles(t *testing.T) {
	t.Parallel()
	stores := fixtureStores(t)
	_, sharded := newServer(t, api.Options{Stores: stores, NGSharded: neuroglancer.ShardAlways})
	_, plain := newServer(t, api.Options{Stores: stores, NGSharded: neuroglancer.ShardNever})
	whole := apitest.MustGet(t, sharded, "/ng/points_pyramid/annotations/spatial0/0.shard")
	if len(whole) < 16 {
		t.Fatalf("a shard of %d bytes", len(whole))
	}
	resp, part := apitest.Get(t, sharded, "/ng/points_pyramid/annotations/spatial0/0.shard", "Range", "bytes=4-11")
	if resp.StatusCode != http.StatusPartialContent || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 4-11/%d", len(whole)) || !bytes.Equal(part, whole[4:12]) {
		t.Fatalf("range: %d %q %x", resp.StatusCode, resp.Header.Get("Content-Range"), part)
	}
	for _, tc := range []struct {
		ts     *httptest.Server
		path   string
		status int
		detail string
	}{
		{sharded, "/ng/points_pyramid/annotations/spatial0/1.shard", 404, "no shard file 1.shard"},
		{sharded, "/ng/points_pyramid/annotations/spatial0/00.shard", 404, "no shard file 00.shard"},
		{sharded, "/ng/points_pyramid/annotations/spatial0/.shard", 404, "no shard file"},
		{sharded, "/ng/points_pyramid/annotations/by_id/1.shard", 404, "no shard file"},
		{sharded, "/ng/skeleton/skeletons/1.shard", 404, "no shard file"},
		{sharded, "/ng/points_pyramid/annotations/spatial0/0.shard", 416, "outside"}, // with the Range below
		{plain, "/ng/points_pyramid/annotations/spatial0/0.shard", 404, "not sharded"},
		{plain, "/ng/points_pyramid/annotations/by_id/0.shard", 404, "not sharded"},
		{plain, "/ng/skeleton/skeletons/0.shard", 404, "not sharded"},
	} {
		var hdr []string
		if tc.status == 416 {
			hdr = []string{"Range", fmt.Sprintf("bytes=%d-", len(whole)+10)}
		}
		resp, body := apitest.Get(t, tc.ts, tc.path, hdr...)
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.detail) || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s: %s", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
}

// shardRoutes serves st's Neuroglancer routes alone with o's cache and
// limits.
func shardRoutes(t testing.TB, st *zvf.Store, o neuroglancer.Options) *httptest.Server {
	o.Store = func(*http.Request) (*zvf.Store, error) { return st, nil }
	return serveRoutes(t, o, neuroglancer.New)
}

// serveRoutes serves the routes of the Neuroglancer server build
// makes of o under /ng/{store}, without the API around them: each error
// is written with its problem status, and no answer is ever not modified.
func serveRoutes(t testing.TB, o neuroglancer.Options, build func(neuroglancer.Options) *neuroglancer.Server) *httptest.Server {
	o.Serve = func(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if err := h(w, r); err != nil {
				status := http.StatusInternalServerError
				if d, ok := err.(*problem.Details); ok {
					status = d.Kind().Status()
				}
				http.Error(w, err.Error(), status)
			}
		}
	}
	o.NotModified = func(http.ResponseWriter, *http.Request, string) bool { return false }
	r := chi.NewRouter()
	r.Route("/ng/{store}", build(o).Routes)
	ts := httptest.NewServer(r)
	t.Cleanup(ts.Close)
	return ts
}

// TestShardBuiltOncePerVersion: concurrent requests of one shard build it
// once, cached at its size; a request for another shard of the source does
// not rebuild the first (a build larger than the bound:
// TestShardOverTheBuildBoundReadsItsRange).
func TestShardBuiltOncePerVersion(t *testing.T) {
	t.Parallel()
	st := storeNamed(t, fixtureStores(t), "points_pyramid")
	ch := &countingCache{Cache: cache.New(64 << 20), loads: map[string]int{}, sizes: map[string]int64{}}
	ts := shardRoutes(t, st, neuroglancer.Options{Cache: ch, Sharded: neuroglancer.ShardAlways})
	paths := []string{"/ng/points_pyramid/annotations/spatial0/0.shard", "/ng/points_pyramid/annotations/by_id/0.shard"}
	bodies := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range bodies {
		wg.Go(func() {
			resp, body := apitest.Get(t, ts, paths[i%2], "Range", "bytes=0-")
			if resp.StatusCode != http.StatusPartialContent {
				t.Errorf("%s: %d %s", paths[i%2], resp.StatusCode, body)
			}
			bodies[i] = body
		})
	}
	wg.Wait()
	built := 0
	for k, n := range ch.loads {
		if strings.Contains(k, ";scale=1\x00shard\x00") {
			built++
			file := bodies[0]
			if strings.Contains(k, "by_id") {
				file = bodies[1]
			}
			if n != 1 || ch.sizes[k] < int64(len(file)) {
				t.Errorf("%q built %d times, cached as %d bytes for %d", k, n, ch.sizes[k], len(file))
			}
		}
	}
	if built != 2 {
		t.Fatalf("shards built: %v", ch.loads)
	}
}

// TestShardOverTheBuildBoundReadsItsRange: a shard holding more than the
// build bound (MaxShardBytes, here 1000 bytes against the 20,000 records
// of points_pyramid's by_id shard) was a 413 however it was read, since
// its first read built it whole. Its reads are now answered from its
// layout, as a shard larger than the cache is: every Range read gives the
// bytes of the whole shard (from a server without the bound), a chunk
// read builds that chunk alone, and a GET without Range streams it all
// (200, unencoded), with no cache or with one. A cell over
// --max-vertices inside such a shard is still a 413.
func TestShardOverTheBuildBoundReadsItsRange(t *testing.T) {
	t.Parallel()
	st := storeNamed(t, fixtureStores(t), "points_pyramid")
	const path = "/ng/points_pyramid/annotations/by_id/0.shard"
	whole := apitest.MustGet(t, shardRoutes(t, st, neuroglancer.Options{Sharded: neuroglancer.ShardAlways}), path)
	if len(whole) < 100_000 {
		t.Fatalf("the by_id shard is %d bytes: not far over the bound", len(whole))
	}
	spec := sharding.Spec{Hash: "identity"}
	var inf shardedInfo
	for _, c := range []zvf.Cache{nil, cache.New(64 << 20)} {
		var srv *neuroglancer.Server
		ts := serveRoutes(t, neuroglancer.Options{Cache: c, Sharded: neuroglancer.ShardAlways, MaxShardBytes: 1000,
			Store: func(*http.Request) (*zvf.Store, error) { return st, nil }},
			func(o neuroglancer.Options) *neuroglancer.Server { srv = neuroglancer.New(o); return srv })
		if err := json.Unmarshal(apitest.MustGet(t, ts, "/ng/points_pyramid/annotations/info"), &inf); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(inf.ByID.Sharding, &spec); err != nil {
			t.Fatal(err)
		}
		sr, err := sharding.NewReader(spec, 0, bytes.NewReader(whole), int64(len(whole)))
		if err != nil {
			t.Fatal(err)
		}
		es, err := sr.Entries()
		if err != nil || len(es) < 1000 {
			t.Fatalf("%d entries: %v", len(es), err)
		}
		for i, rng := range [][2]int64{{0, 16}, {es[0].Offset, es[0].Offset + es[0].Size}, {es[len(es)/2].Offset, es[len(es)/2].Offset + es[len(es)/2].Size},
			{int64(len(whole)) - 50, int64(len(whole))}} {
			before := srv.ChunksBuilt()
			resp, got := apitest.Get(t, ts, path, "Range", fmt.Sprintf("bytes=%d-%d", rng[0], rng[1]-1))
			if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(got, whole[rng[0]:rng[1]]) {
				t.Fatalf("cache %v, bytes %d-%d: %d %.200s", c != nil, rng[0], rng[1]-1, resp.StatusCode, got)
			}
			if d := srv.ChunksBuilt() - before; i == 2 && c != nil && d != 1 {
				t.Errorf("a chunk read built %d chunks, want 1", d)
			}
		}
		resp, got := apitest.Get(t, ts, path)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(got, whole) || resp.Header.Get("Content-Encoding") != "" {
			t.Fatalf("cache %v, the whole shard: %d, %d bytes of %d, %q", c != nil, resp.StatusCode, len(got), len(whole), resp.Header.Get("Content-Encoding"))
		}
	}
	tight := shardRoutes(t, st, neuroglancer.Options{Sharded: neuroglancer.ShardAlways, MaxShardBytes: 1000, MaxAnnotations: 10})
	resp, body := apitest.Get(t, tight, "/ng/points_pyramid/annotations/"+inf.Spatial[len(inf.Spatial)-1].Key+"/0.shard", "Range", "bytes=0-15")
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "more than this server's 10 per response") {
		t.Fatalf("a cell over --max-vertices in a shard over the bound: %d %s", resp.StatusCode, body)
	}
}

// TestShardAuto: auto shards a source from ShardAbove keys on (20,000
// annotations of points_pyramid; its skeleton store's objects), not below.
func TestShardAuto(t *testing.T) {
	t.Parallel()
	stores := fixtureStores(t)
	points, skel := storeNamed(t, stores, "points_pyramid"), storeNamed(t, stores, "skeleton")
	l0, err := skel.Level(0)
	if err != nil {
		t.Fatal(err)
	}
	objects := l0.Info().ObjectCount
	for _, tc := range []struct {
		st    *zvf.Store
		path  string
		above int64
		want  bool
	}{
		{points, "/ng/points_pyramid/annotations/info", 20_000, true},
		{points, "/ng/points_pyramid/annotations/info", 20_001, false},
		{skel, "/ng/skeleton/skeletons/info", objects, true},
		{skel, "/ng/skeleton/skeletons/info", objects + 1, false},
	} {
		ts := shardRoutes(t, tc.st, neuroglancer.Options{Sharded: neuroglancer.ShardAuto, ShardAbove: tc.above})
		body := apitest.MustGet(t, ts, tc.path)
		if got := strings.Contains(string(body), `"sharding"`); got != tc.want {
			t.Errorf("%s above %d: sharded %v, want %v: %.300s", tc.path, tc.above, got, tc.want, body)
		}
	}
}

// TestShardLargerThanCacheReadsItsRange: a shard file the cache cannot
// keep was built whole for every Range read Neuroglancer made of it (the
// shard index, a minishard index, one cell or record: 50 MB allocated and
// up to 0.2 s a read, BenchmarkShardRangeLargerThanCache). Now, once such
// a shard has been seen, a read builds only the chunks its range covers,
// from the shard's cached layout (its indexes, not its data): none for an
// index, one for a chunk.
// Every byte read equals the whole shard's.
func TestShardLargerThanCacheReadsItsRange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := zvftest.Store(t, "mem://")
	writeBinnedPoints(t, mem, 100_000, 5, 6)
	// The store reads its chunks through a cache of its own, so that
	// they do not push the spatial index and the layout out of the small
	// cache of the Neuroglancer answers (the index is 9 kB, a layout
	// about 80 kB, a shard over 1 MB).
	open := func() *zvf.Store {
		st, err := zvf.Open(ctx, storage.Sub(mem, "p"), zvf.Options{Name: "p", Cache: cache.New(64 << 20)})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	big := shardRoutes(t, open(), neuroglancer.Options{Cache: cache.New(256 << 20), Sharded: neuroglancer.ShardAlways})
	smallSt, smallCh := open(), cache.New(1<<20)
	var srv *neuroglancer.Server
	small := serveRoutes(t, neuroglancer.Options{Cache: smallCh, Sharded: neuroglancer.ShardAlways,
		Store: func(*http.Request) (*zvf.Store, error) { return smallSt, nil }},
		func(o neuroglancer.Options) *neuroglancer.Server { srv = neuroglancer.New(o); return srv })

	var inf shardedInfo
	if err := json.Unmarshal(apitest.MustGet(t, small, "/ng/p/annotations/info"), &inf); err != nil {
		t.Fatal(err)
	}
	type source struct {
		key  string
		spec []byte
	}
	sources := []source{{inf.ByID.Key, inf.ByID.Sharding}}
	for _, sp := range inf.Spatial {
		sources = append(sources, source{sp.Key, sp.Sharding})
	}
	read := func(ts *httptest.Server, path string, lo, hi int64) []byte {
		t.Helper()
		resp, body := apitest.Get(t, ts, path, "Range", fmt.Sprintf("bytes=%d-%d", lo, hi-1))
		if resp.StatusCode != http.StatusPartialContent || int64(len(body)) != hi-lo {
			t.Fatalf("%s bytes %d-%d: %d, %d bytes %.200s", path, lo, hi-1, resp.StatusCode, len(body), body)
		}
		return body
	}
	reads := 0
	for _, src := range sources {
		var spec sharding.Spec
		if err := json.Unmarshal(src.spec, &spec); err != nil {
			t.Fatal(err)
		}
		for n := range spec.NumShards() {
			path := "/ng/p/annotations/" + src.key + "/" + spec.ShardFile(n)
			resp, whole := apitest.Get(t, big, path)
			if resp.StatusCode == http.StatusNotFound {
				continue
			}
			if resp.StatusCode != 200 {
				t.Fatalf("%s: %d %.200s", path, resp.StatusCode, whole)
			}
			// The first read meets the shard too large to keep; the
			// second builds its layout, which the cache keeps: from then
			// on no read builds the whole shard again.
			read(small, path, 0, 16)
			read(small, path, 0, 16)
			sr, err := sharding.NewReader(spec, n, bytes.NewReader(whole), int64(len(whole)))
			if err != nil {
				t.Fatal(err)
			}
			index := spec.IndexSize()
			check := func(what string, lo, hi int64, builds int64) {
				t.Helper()
				before := srv.ChunksBuilt()
				if got := read(small, path, lo, hi); !bytes.Equal(got, whole[lo:hi]) {
					t.Fatalf("%s %s bytes %d-%d differ from the whole shard's", path, what, lo, hi-1)
				}
				if d := srv.ChunksBuilt() - before; d != builds {
					t.Fatalf("%s %s bytes %d-%d: %d chunks built, want %d", path, what, lo, hi-1, d, builds)
				}
				reads++
			}
			check("shard index", 0, index, 0)
			minis := int64(1) << spec.MinishardBits
			for m := int64(0); m < minis; m += max(1, minis/8) { // 8 minishards a shard, a few chunks each
				start := index + int64(binary.LittleEndian.Uint64(whole[16*m:]))
				end := index + int64(binary.LittleEndian.Uint64(whole[16*m+8:]))
				if end == start {
					continue
				}
				check("minishard index", start, end, 0)
				chunks, err := sr.MinishardIndex(uint64(m))
				if err != nil {
					t.Fatal(err)
				}
				for i, c := range chunks {
					if c.Size > 0 && i%max(1, len(chunks)/4) == 0 {
						check(fmt.Sprintf("chunk %d", c.Key), c.Offset, c.Offset+c.Size, 1)
					}
				}
			}
		}
	}
	if reads < 40 {
		t.Fatalf("only %d reads checked", reads)
	}
}

// shardlessCache is a cache that keeps no shard (as one smaller than every
// shard would), but keeps the rest: the spatial index, without which a
// source is refused, and shard layouts.
type shardlessCache struct{ *cache.Cache }

func isShard(key string) bool {
	return strings.Contains(key, "\x00shard\x00") && !strings.HasSuffix(key, "\x00layout")
}

func (c shardlessCache) Get(ctx context.Context, key string, load func(context.Context) (any, int64, error)) (any, error) {
	if isShard(key) {
		v, _, err := load(ctx)
		return v, err
	}
	return c.Cache.Get(ctx, key, load)
}

func (c shardlessCache) GetDetached(ctx context.Context, key string, load func(context.Context) (any, int64, error)) (any, error) {
	if isShard(key) {
		v, _, err := load(ctx)
		return v, err
	}
	return c.Cache.GetDetached(ctx, key, load)
}

func (c shardlessCache) Peek(key string) (any, bool) {
	if isShard(key) {
		return nil, false
	}
	return c.Cache.Peek(key)
}

// TestShardRangeReadsMatchWholeShards: Range reads answered from a
// shard's layout (a cache that keeps no shard) give the bytes of
// the whole shard for every kind of sharded source: by_id of lines (dense
// ids) and polylines (object ids), spatial levels of each, and skeletons.
func TestShardRangeReadsMatchWholeShards(t *testing.T) {
	t.Parallel()
	stores := fixtureStores(t)
	for _, name := range []string{"graph", "polylines", "skeleton"} {
		st := storeNamed(t, stores, name)
		big := shardRoutes(t, st, neuroglancer.Options{Cache: cache.New(64 << 20), Sharded: neuroglancer.ShardAlways})
		small := shardRoutes(t, st, neuroglancer.Options{Cache: shardlessCache{cache.New(64 << 20)}, Sharded: neuroglancer.ShardAlways})
		type source struct {
			dir, key string
			spec     []byte
		}
		var sources []source
		for _, route := range neuroglancer.RoutesOf(st) {
			dir := "/ng/" + name + "/" + route
			switch route {
			case "annotations", "lines":
				var inf shardedInfo
				if err := json.Unmarshal(apitest.MustGet(t, big, dir+"/info"), &inf); err != nil {
					t.Fatal(err)
				}
				sources = append(sources, source{dir, inf.ByID.Key, inf.ByID.Sharding})
				for _, sp := range inf.Spatial {
					sources = append(sources, source{dir, sp.Key, sp.Sharding})
				}
			case "skeletons":
				var inf struct {
					Sharding json.RawMessage `json:"sharding"`
				}
				if err := json.Unmarshal(apitest.MustGet(t, big, dir+"/info"), &inf); err != nil {
					t.Fatal(err)
				}
				sources = append(sources, source{dir, ".", inf.Sharding})
			}
		}
		chunks := 0
		for _, src := range sources {
			var spec sharding.Spec
			if err := json.Unmarshal(src.spec, &spec); err != nil {
				t.Fatalf("%s %s: %v", src.dir, src.key, err)
			}
			for n := range spec.NumShards() {
				path := src.dir + "/" + src.key + "/" + spec.ShardFile(n)
				if src.key == "." {
					path = src.dir + "/" + spec.ShardFile(n)
				}
				resp, whole := apitest.Get(t, big, path)
				if resp.StatusCode == http.StatusNotFound {
					continue
				}
				sr, err := sharding.NewReader(spec, n, bytes.NewReader(whole), int64(len(whole)))
				if err != nil {
					t.Fatal(err)
				}
				es, err := sr.Entries()
				if err != nil {
					t.Fatal(err)
				}
				apitest.Get(t, small, path, "Range", "bytes=0-15") // meets the shard not kept
				for i, e := range es {
					if e.Size == 0 || i%max(1, len(es)/10) != 0 {
						continue
					}
					resp, got := apitest.Get(t, small, path, "Range", fmt.Sprintf("bytes=%d-%d", e.Offset, e.Offset+e.Size-1))
					if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(got, whole[e.Offset:e.Offset+e.Size]) {
						t.Fatalf("%s chunk %d: %d, %d bytes, want the whole shard's %d", path, e.Key, resp.StatusCode, len(got), e.Size)
					}
					chunks++
				}
				resp, got := apitest.Get(t, small, path, "Range", "bytes=0-")
				if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(got, whole) {
					t.Fatalf("%s read whole by Range: %d, %d bytes of %d", path, resp.StatusCode, len(got), len(whole))
				}
			}
		}
		if chunks < 10 {
			t.Fatalf("%s: only %d chunks read", name, chunks)
		}
	}
}

// writeBinnedPoints writes n points, uniform in [0, 1000)³ from the seeds
// s1 and s2, as store "p" of mem: chunks of 250 in bins of 50.
func writeBinnedPoints(t *testing.T, mem storage.Writer, n int, s1, s2 uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(s1, s2))
	pos := make([]float32, 3*n)
	for i := range pos {
		pos[i] = float32(rng.Float64() * 1000)
	}
	o := writer.Options{ChunkShape: []float64{250, 250, 250}, BinShape: []float64{50, 50, 50}}
	if _, err := writer.WritePoints(context.Background(), mem, "p", &writer.PointCloud{Positions: pos}, o); err != nil {
		t.Fatal(err)
	}
}
