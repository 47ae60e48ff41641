package api_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// change is one edit of a store's copy: make turns the file or folder at
// path (p, in the copy) into what the case needs.
type change struct {
	path string
	make func(t *testing.T, p string)
}

func (c change) apply(t *testing.T, dir string) {
	t.Helper()
	c.make(t, filepath.Join(dir, filepath.FromSlash(c.path)))
}

// edit rewrites the file at path with f of its bytes.
func edit(path string, f func([]byte) []byte) change {
	return change{path, func(t *testing.T, p string) {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}}
}

// remove deletes the file or folder at path.
func remove(path string) change {
	return change{path, func(t *testing.T, p string) {
		t.Helper()
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}}
}

// storeCopy is a writable copy of a reference store that cases change in
// turn: what a case changed is put back from the fixture when the case
// ends, so one copy serves them all (copying a store costs far more than
// a case).
type storeCopy struct{ src, dir string }

// fixtures09 holds the ZVF 0.9 stores (names ending in _v09).
const fixtures09 = "../testdata/zvf-0.9"

// fixtureDir is the folder of a reference store (of ZVF 0.9 for a name
// ending in _v09).
func fixtureDir(fixture string) string {
	if strings.HasSuffix(fixture, "_v09") {
		return filepath.Join(fixtures09, fixture+".zarrvectors")
	}
	return filepath.Join(fixtures, fixture+".zarrvectors")
}

func copyStore(t *testing.T, fixture string) *storeCopy {
	t.Helper()
	src := fixtureDir(fixture)
	return &storeCopy{src: src, dir: zvftest.CopyTree(t, src)}
}

// change applies cs to the copy until t ends.
func (s *storeCopy) change(t *testing.T, cs ...change) {
	t.Helper()
	for _, c := range cs {
		t.Cleanup(func() { s.restore(t, c.path) })
		c.apply(t, s.dir)
	}
}

// restore replaces the file or folder at path in the copy by the fixture's.
func (s *storeCopy) restore(t *testing.T, path string) {
	t.Helper()
	dst := filepath.Join(s.dir, filepath.FromSlash(path))
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	zvftest.CopyInto(t, filepath.Join(s.src, filepath.FromSlash(path)), dst)
}

// check fails t unless the copy holds exactly the fixture's files: a
// change left behind would quietly make later cases test something else.
func (s *storeCopy) check(t *testing.T) {
	t.Helper()
	files := func(root string) map[string]string {
		out := map[string]string{}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			rel, _ := filepath.Rel(root, p)
			out[rel] = string(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	want, got := files(s.src), files(s.dir)
	if len(got) != len(want) {
		t.Fatalf("the copy holds %d files, the fixture %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s differs from the fixture after the cases", k)
		}
	}
}

type mutation struct {
	name    string
	fixture string
	changes []change
}

func put64(off int, v uint64) func([]byte) []byte {
	return func(b []byte) []byte {
		if off+8 <= len(b) {
			binary.LittleEndian.PutUint64(b[off:], v)
		}
		return b
	}
}

func put32(off int, v uint32) func([]byte) []byte {
	return func(b []byte) []byte {
		if off+4 <= len(b) {
			binary.LittleEndian.PutUint32(b[off:], v)
		}
		return b
	}
}

// shardIndex rewrites the shard_index entries of a __shard_ array's
// zarr.json.
func shardIndex(f func(idx map[string][]int64)) func([]byte) []byte {
	return func(b []byte) []byte {
		var node map[string]any
		if err := json.Unmarshal(b, &node); err != nil {
			panic(err)
		}
		attrs := node["attributes"].(map[string]any)
		raw, _ := json.Marshal(attrs["shard_index"])
		var idx map[string][]int64
		if err := json.Unmarshal(raw, &idx); err != nil {
			panic(err)
		}
		f(idx)
		attrs["shard_index"] = idx
		out, _ := json.Marshal(node)
		return out
	}
}

func replace(old, new string) func([]byte) []byte {
	return func(b []byte) []byte { return []byte(strings.Replace(string(b), old, new, 1)) }
}

// mutations lists the corruptions issue 8 names, applied to copies of the
// reference stores.
func mutations() []mutation {
	const gv, gf = "0/vertices/3.4.2", "0/vertex_fragments/3.4.2"
	const gs = "0/vertices/__shard_000028" // holds chunk 5.3.2 of graph_sharded
	return []mutation{
		{"truncated vertex blob", "graph", []change{edit(gv+"/c/0", func(b []byte) []byte { return b[:len(b)/2+1] })}},
		{"empty vertex blob", "graph", []change{edit(gv+"/c/0", func(b []byte) []byte { return nil })}},
		{"fragment index wrong magic", "graph", []change{edit(gf+"/c/0", func(b []byte) []byte { b[0] ^= 0xff; return b })}},
		{"fragment index F lies", "graph", []change{edit(gf+"/c/0", put32(8, 1<<31))}},
		{"fragment index R lies", "graph", []change{edit(gf+"/c/0", put32(12, 7))}},
		{"fragment index T lies", "polylines", []change{edit("0/vertex_fragments/1.4.2/c/0", func(b []byte) []byte { return append(b, make([]byte, 8)...) })}},
		{"negative range start", "graph", []change{edit(gf+"/c/0", put64(24, 1<<63))}},
		{"overflowing range count", "graph", []change{edit(gf+"/c/0", put64(32, 1<<62))}},
		{"manifest names missing chunk", "graph", []change{remove(gv)}},
		{"manifest names missing fragment", "points_pyramid", []change{edit("0/vertex_fragments/0.1.1/c/0", func(b []byte) []byte {
			// F = 0: the chunk keeps its rows but names no fragments.
			out := append([]byte(nil), b[:16]...)
			binary.LittleEndian.PutUint32(out[8:], 0)
			binary.LittleEndian.PutUint32(out[12:], 0)
			return out
		})}},
		{"manifest chunk garbage", "polylines", []change{edit("0/object_index/manifests/c/0", func(b []byte) []byte { return b[:len(b)/3] })}},
		{"blob not whole rows", "mesh", []change{edit("0/vertices/1.1.1/c/0", func(b []byte) []byte { return b[:len(b)-4] })}},
		{"bad chunk zarr.json", "graph", []change{edit(gv+"/zarr.json", func([]byte) []byte { return []byte(`{"zarr_format":3,"node_type":"array","shape":[-4]`) })}},
		// A chunk's byte array declared 2-D: refused as bad metadata (it
		// was an untyped error, a 500 naming zarr.Array.ReadBytes).
		{"vertex chunk array 2-D", "graph", []change{edit(gv+"/zarr.json", func(b []byte) []byte {
			return []byte(strings.ReplaceAll(string(b), `[48]`, `[16,3]`))
		})}},
		{"missing chunk zarr.json", "graph", []change{remove(gv + "/zarr.json")}},
		{"unknown codec", "graph", []change{edit(gv+"/zarr.json", replace(`"name":"bytes"`, `"name":"lzma9"`))}},
		{"unknown data type", "graph", []change{edit(gv+"/zarr.json", replace(`"uint8"`, `"uint7"`))}},
		{"links past the chunk", "graph", []change{edit("0/links/0/3.4.2/c/0", put64(0, 1<<40))}},
		{"cross-chunk links ragged", "mesh", []change{edit("0/cross_chunk_links/0/data/c/0", func(b []byte) []byte { return b[:len(b)-3] })}},
		{"bad level zarr.json", "points_pyramid", []change{edit("1/zarr.json", func([]byte) []byte { return []byte("[1,2") })}},
		{"bad root zarr.json", "skeleton", []change{edit("zarr.json", func([]byte) []byte { return []byte("not json") })}},
		{"missing root zarr.json", "skeleton", []change{remove("zarr.json")}},
		{"unsupported zv_version", "skeleton", []change{edit("zarr.json", replace(`"0.7.0"`, `"1.0.0"`))}},
		{"vertex attribute truncated", "points_pyramid", []change{edit("0/vertex_attributes/intensity/0.1.1/c/0", func(b []byte) []byte { return b[:len(b)-1] })}},
		{"groups offsets past data", "points_pyramid", []change{edit("0/groups/offsets/c/0", put64(8, 1<<50))}},
		{"shard index points outside the shard", "graph_sharded", []change{edit(gs+"/zarr.json", shardIndex(func(m map[string][]int64) {
			for k := range m {
				m[k] = []int64{4, 1 << 40}
			}
		}))}},
		{"shard index offset past the shard", "graph_sharded", []change{edit(gs+"/zarr.json", shardIndex(func(m map[string][]int64) {
			for k := range m {
				m[k] = []int64{1 << 62, 12}
			}
		}))}},
		{"shard index negative", "graph_sharded", []change{edit(gs+"/zarr.json", shardIndex(func(m map[string][]int64) {
			for k := range m {
				m[k] = []int64{-8, 12}
			}
		}))}},
		{"shard blob truncated", "graph_sharded", []change{edit(gs+"/c/0", func(b []byte) []byte { return b[:len(b)/2] })}},
		// Issue 12: a missing chunk reads as the fill value, which was
		// allocated at the declared chunk size on the cache's goroutine: a
		// panic there killed the server. Now the array is refused at open.
		{"vertex blob declares a 2^62-1 chunk, chunk missing", "graph", []change{
			edit(gv+"/zarr.json", replace(`"chunk_shape":[48]`, `"chunk_shape":[4611686018427387903]`)),
			remove(gv + "/c/0"),
		}},
		// The object count sizes nothing: the Neuroglancer routes read
		// objects a batch at a time and meet the short manifest array.
		{"object count far past the manifests", "polylines", []change{edit("0/object_index/zarr.json", replace(`"num_objects": 200`, `"num_objects": 4611686018427387903`))}},
		// ZVF 0.9 (issue 18): chunk-grid cells, plain, zstd and sharded;
		// graph_v09's chunk 3.4.5 has a cell in every family.
		{"0.9 vertex cell truncated", "graph_v09", []change{edit("0/vertices/c/3/4/5", func(b []byte) []byte { return b[:len(b)-5] })}},
		{"0.9 cell listed but not stored", "graph_v09", []change{remove("0/vertices/c/3/4/5")}},
		{"0.9 fragment index cell garbage", "graph_v09", []change{edit("0/vertex_fragments/c/3/4/5", func(b []byte) []byte { b[8] ^= 0xff; return b })}},
		{"0.9 nonempty_chunks outside the grid", "graph_v09", []change{edit("0/vertices/zarr.json", replace(`"1.4.5"`, `"99.4.5"`))}},
		{"0.9 cross link cell cut", "graph_v09", []change{edit("0/links/0/0.0.+1/c/3/4/5", func(b []byte) []byte { return b[:len(b)-3] })}},
		{"0.9 intra link past the chunk", "graph_v09", []change{edit("0/links/0/0.0.0/c/3/4/5", put64(8, 1<<40))}},
		// The cell's first record's first endpoint: past the vlen frame
		// (8 bytes), the ragged blob's group count K and K offsets, and
		// the record's perm_idx.
		{"0.9 cross link row past the chunk", "graph_v09", []change{edit("0/links/0/0.0.+1/c/3/4/5", func(b []byte) []byte {
			return put64(8+8+8*int(binary.LittleEndian.Uint64(b[8:]))+8, 1<<20)(b)
		})}},
		// The record in cell 3.4.5 of links/0/0.0.+1 joins 3.4.5 and 3.4.6,
		// which the level then lacks.
		{"0.9 cross link to a missing chunk", "graph_v09", []change{
			edit("0/vertices/zarr.json", replace("\"3.4.6\",\n      ", "")),
			remove("0/vertices/c/3/4/6"),
		}},
		{"0.9 chunk-grid fill value holds bytes", "graph_v09", []change{edit("0/vertices/zarr.json", replace(`"fill_value": ""`, `"fill_value": "AAAAAAAAAAAA"`))}},
		{"0.9 newer revision", "graph_v09", []change{edit("zarr.json", replace(`"0.9.0"`, `"0.9.9"`))}},
		{"0.9 zstd cell cut", "streamlines_zstd_v09", []change{edit("0/vertices/c/3/3/3", func(b []byte) []byte { return b[:len(b)-10] })}},
		{"0.9 shard index checksum", "mesh_sharded_v09", []change{edit("0/vertices/c/0/0/0", func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b })}},
		{"0.9 shard cut short", "mesh_sharded_v09", []change{edit("0/links/0/0.0.0_0.0.0/c/0/0/0", func(b []byte) []byte { return b[:len(b)/2] })}},
		{"0.9 split skeleton", "skeleton_v09", []change{edit("zarr.json", replace(`"linked_across_chunks"`, `"split_at_chunk_faces"`))}},
		// A zstd frame declaring 256 MiB in 18 bytes, in a variable-length
		// array (no exact decoded size): refused before allocating.
		{"manifest chunk is a zstd bomb", "polylines", []change{edit("0/object_index/manifests/c/0", func([]byte) []byte {
			return []byte{0x28, 0xB5, 0x2F, 0xFD, 0xC0, 6 << 3, 0, 0, 0, 0x10, 0, 0, 0, 0, 0x03, 0x80, 0, 'a'}
		})}},
	}
}

// TestCorruptStoreSuite: for every mutation, every route answers with 200
// or a problem+json error (never an internal error, a panic or a hang) —
// a store refused at open answers every one of its routes with the typed
// problem; goroutines and heap return to their baseline; a healthy store
// served beside it keeps answering exactly as before.
//
// Each fixture is copied once and its mutations run in turn on the copy
// (each undone when it ends); the fixtures run in parallel.
func TestCorruptStoreSuite(t *testing.T) {
	healthy := openStores(t, "graph")[0]
	healthyAnswer := graphBoxAnswer(t, healthy)
	leftover := goleak.IgnoreCurrent()
	heap0 := heapInUse()
	var mu sync.Mutex
	outcomes := map[string]int{}
	// Mutations whose routes must answer this status where they read the
	// bad data (and otherwise 200, or 404 for what the store lacks).
	wantStatus := map[string]int{
		"vertex blob declares a 2^62-1 chunk, chunk missing": http.StatusUnprocessableEntity,
		"manifest chunk is a zstd bomb":                      http.StatusUnprocessableEntity,
		"vertex chunk array 2-D":                             http.StatusUnprocessableEntity,
		"0.9 cross link row past the chunk":                  http.StatusUnprocessableEntity,
		"0.9 cross link to a missing chunk":                  http.StatusUnprocessableEntity,
		"0.9 chunk-grid fill value holds bytes":              http.StatusUnprocessableEntity,
	}
	var order []string
	byFixture := map[string][]mutation{}
	for _, m := range mutations() {
		if byFixture[m.fixture] == nil {
			order = append(order, m.fixture)
		}
		byFixture[m.fixture] = append(byFixture[m.fixture], m)
	}
	t.Run("fixtures", func(t *testing.T) {
		for _, fixture := range order {
			t.Run(fixture, func(t *testing.T) {
				t.Parallel()
				sc := copyStore(t, fixture)
				for _, m := range byFixture[fixture] {
					t.Run(m.name, func(t *testing.T) {
						sc.change(t, m.changes...)
						outcome := checkCorruptStore(t, sc.dir, healthy, healthyAnswer, wantStatus[m.name])
						mu.Lock()
						outcomes[outcome]++
						mu.Unlock()
					})
				}
				sc.check(t)
			})
		}
	})
	t.Logf("%d mutations: %v", len(mutations()), outcomes)
	goleak.VerifyNone(t, append(ignoredGoroutines(), leftover)...)
	// Every mutated store, its cache and its server are unreachable now:
	// the heap must be back near where it started.
	if heap1 := heapInUse(); heap1 > heap0+16<<20 {
		t.Fatalf("heap in use %d MB after the suite, %d MB before", heap1>>20, heap0>>20)
	} else {
		t.Logf("heap in use: %.1f MB before, %.1f MB after", float64(heap0)/(1<<20), float64(heap1)/(1<<20))
	}
}

// checkCorruptStore serves the store in dir (as "bad", beside healthy) and
// asks every route of it; it returns which kind of outcome it saw.
func checkCorruptStore(t *testing.T, dir string, healthy *zvf.Store, healthyAnswer []byte, want int) string {
	t.Helper()
	ctx := context.Background()
	st, err := blobstore.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, srv := handleServer(t, st, zvf.Options{Name: "bad", Cache: cache.New(32 << 20)}, zvf.Watch{},
		api.Options{Stores: []*zvf.Store{healthy}, RequestTimeout: 10 * time.Second})
	bad, openErr := h.Current()
	if openErr != nil && !errors.Is(openErr, zvf.ErrCorrupt) && !errors.Is(openErr, zvf.ErrUnsupported) {
		t.Fatalf("open failed with an untyped error: %v", openErr)
	}
	hd := srv.Handler()
	routes := []string{"/api/v1/stores/bad", "/api/v1/stores/bad/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&attributes=*",
		"/api/v1/stores/bad/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&f=bin", "/api/v1/stores/bad/bbox?min=0,0,0&max=500,500,500&level=auto&limit=100",
		"/api/v1/stores/bad/objects/0?attributes=*", "/api/v1/stores/bad/objects/1/manifest", "/api/v1/stores/bad/objects/0/levels",
		"/api/v1/stores/bad/groups/0", "/api/v1/stores/bad/levels/0/chunks", "/api/v1/stores/bad/levels/1/chunks",
		// The Neuroglancer sources read the whole of level 0 for their
		// spatial index: every corruption reaches them.
		"/ng/bad/annotations/info", "/ng/bad/annotations/spatial0/0_0_0", "/ng/bad/annotations/by_id/1", "/ng/bad/lines/info",
		"/ng/bad/skeletons/info", "/ng/bad/skeletons/1", "/ng/bad/skeletons/seg_props/info", "/ng/bad/meshes/1:0", "/ng/bad/meshes/frag/1"}
	if bad != nil {
		l0, _ := bad.Level(0)
		for _, k := range l0.Keys() {
			routes = append(routes, "/api/v1/stores/bad/levels/0/chunks/"+k.String()+"?attributes=*")
		}
	}
	if code, _, body := serve(t, hd, "/api/v1/stores"); code != 200 || strings.Contains(string(body), dir) {
		t.Fatalf("catalog: %d %.300s", code, body)
	}
	errs, wanted := 0, 0
	for _, r := range routes {
		code, ctype, body := serve(t, hd, r)
		if code == 200 {
			if openErr != nil {
				t.Fatalf("%s: 200 from a store that did not open", r)
			}
			continue
		}
		errs++
		if ctype != "application/problem+json" {
			t.Fatalf("%s: %d with %s", r, code, ctype)
		}
		var p api.Problem
		if err := json.Unmarshal(body, &p); err != nil || p.Status != code {
			t.Fatalf("%s: bad problem body %s", r, body)
		}
		if strings.HasSuffix(p.Type, "/internal") || code == 500 {
			t.Fatalf("%s: internal error instead of a classified one: %s", r, body)
		}
		if want != 0 {
			if code != want && code != http.StatusNotFound {
				t.Fatalf("%s: %d, want %d: %s", r, code, want, body)
			}
			if code == want {
				wanted++
			}
		}
		if strings.Contains(string(body), dir) {
			t.Fatalf("%s: response leaks a local path", r)
		}
	}
	// The healthy store beside it is unaffected.
	if code, _, body := serve(t, hd, graphBox); code != 200 || !bytes.Equal(body, healthyAnswer) {
		t.Fatalf("healthy store: %d %.200s", code, body)
	}
	switch {
	case errs == 0:
		t.Fatalf("no route noticed the corruption")
	case want != 0 && wanted == 0:
		t.Fatalf("no route answered %d", want)
	case openErr != nil:
		return "refused at open: every route a problem+json"
	}
	return "problem+json on the routes that read it"
}

// graphBoxAnswer is the answer to graphBox of s (the graph fixture), served
// alone; its count must be the reader's for the same box.
func graphBoxAnswer(t *testing.T, s *zvf.Store) []byte {
	t.Helper()
	srv := apitest.New(t, api.Options{Stores: []*zvf.Store{s}})
	rows, _ := readerAnswer(t, s, 0, []float64{390, 223, 585}, []float64{480, 313, 675})
	code, _, body := serve(t, srv.Handler(), graphBox)
	if code != 200 || len(rows) == 0 || !bytes.Contains(body, fmt.Appendf(nil, `"count":%d,`, len(rows))) {
		t.Fatalf("%s: %d, the reader has %d rows: %.200s", graphBox, code, len(rows), body)
	}
	return body
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

func serve(t *testing.T, h http.Handler, path string) (int, string, []byte) {
	t.Helper()
	code, hdr, body := serveFull(t, h, path)
	return code, hdr.Get("Content-Type"), body
}

// serveFull runs one request in-process, failing the test on a panic or
// a hang.
func serveFull(t *testing.T, h http.Handler, path string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return serveRequest(t, h, req)
}

// serveRequest is serveFull for a request of the caller's (with its
// context, say).
// hangAfter is how long an in-process request may take before it counts
// as hung: a safety net for a clear failure, not a speed bound. It was 15
// s, which a request that rewrites a whole store from its hook
// (TestRewriteDuringAnswer) passed on a 2-core machine at load 23.
const hangAfter = 2 * time.Minute

func serveRequest(t *testing.T, h http.Handler, req *http.Request) (int, http.Header, []byte) {
	t.Helper()
	rec := newRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if v := recover(); v != nil {
				rec.panicked = fmt.Sprint(v)
			}
		}()
		h.ServeHTTP(rec, req)
	}()
	select {
	case <-done:
	case <-time.After(hangAfter):
		t.Fatalf("%s hangs", req.URL)
	}
	if rec.panicked != "" {
		t.Fatalf("%s: handler panicked (%s)", req.URL, rec.panicked)
	}
	body, _ := io.ReadAll(rec.body())
	return rec.code, rec.Header(), body
}

// TestEmptyChunkFoldersAnswer: a store holding empty chunk and level
// folders (a crashed writer, a delete that keeps folders) answers the box
// of its whole bounds, at a level and at level=auto, exactly as without
// them. Before, both were 404 "no such cell", and level=auto with a small
// limit answered 200 from the empty "level" 7: no vertices.
func TestEmptyChunkFoldersAnswer(t *testing.T) {
	t.Parallel()
	dir := zvftest.CopyTree(t, filepath.Join(fixtures, "points_pyramid.zarrvectors"))
	for _, f := range []string{"0/vertices/9.9.9", "1/vertices/4.4.4/c", "7"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(f)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stray := localServer(t, "points_pyramid", dir)
	stores := openStores(t, "points_pyramid")
	clean := apitest.New(t, api.Options{Stores: stores})
	b := stores[0].Info().Bounds // the same metadata as the stray copy's
	box := "/api/v1/stores/points_pyramid/bbox?min=" + corner(b[0]) + "&max=" + corner(b[1])
	for _, q := range []string{"&level=0", "&level=1", "&level=auto&limit=5", "&level=auto&limit=100", "&level=auto&limit=100000"} {
		code, _, got := serveFull(t, stray.Handler(), box+q)
		_, _, want := serveFull(t, clean.Handler(), box+q)
		if code != http.StatusOK || !bytes.Equal(got, want) {
			t.Errorf("%s: %d %.300s\nwant %.300s", q, code, got, want)
		}
	}
}

// recorder is a minimal ResponseWriter for in-process requests.
type recorder struct {
	h        http.Header
	code     int
	buf      bytes.Buffer
	panicked string
}

func newRecorder() *recorder { return &recorder{h: http.Header{}, code: 200} }

func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) WriteHeader(c int)           { r.code = c }
func (r *recorder) Write(p []byte) (int, error) { return r.buf.Write(p) }
func (r *recorder) body() io.Reader             { return &r.buf }
