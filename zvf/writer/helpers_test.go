package writer

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/zvfserve/zvfserve/fragindex"
	"github.com/zvfserve/zvfserve/vlen"
	"github.com/zvfserve/zvfserve/zvf/manifest"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zarr/blosc"
)

// memStore is a minimal in-memory storage.Writer for tests.
type memStore struct {
	mu sync.Mutex
	m  map[string][]byte
	// failAfter, when > 0, makes the n-th Put and later ones fail.
	failAfter int
	puts      int
}

func newMemStore() *memStore { return &memStore{m: map[string][]byte{}} }

var errInjected = fmt.Errorf("injected put failure")

func (s *memStore) Put(_ context.Context, key string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.puts++
	if s.failAfter > 0 && s.puts >= s.failAfter {
		return errInjected
	}
	s.m[key] = slices.Clone(data)
	return nil
}

func (s *memStore) Delete(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
	return nil
}

func (s *memStore) get(key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[key]
	if !ok {
		return nil, &storage.Error{Op: "get", Key: key, Err: storage.ErrNotFound}
	}
	return slices.Clone(b), nil
}

func (s *memStore) Get(_ context.Context, key string, o storage.ReadOptions) (storage.Object, error) {
	b, err := s.get(key)
	if err != nil {
		return storage.Object{}, err
	}
	a := storage.Attrs{Size: int64(len(b))}
	n, err := storage.Want(o, int64(len(b)))
	if err != nil {
		return storage.Object{}, err
	}
	if o.Off >= int64(len(b)) {
		return storage.Object{Attrs: a}, nil
	}
	return storage.Object{Data: b[o.Off : o.Off+n], Attrs: a}, nil
}

func (s *memStore) Now() time.Time { return time.Now() }

func (s *memStore) List(_ context.Context, prefix string) (storage.Listing, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var l storage.Listing
	seen := map[string]bool{}
	for k := range s.m {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		rest := k[len(prefix):]
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			p := prefix + rest[:i+1]
			if !seen[p] {
				seen[p] = true
				l.Prefixes = append(l.Prefixes, p)
			}
		} else {
			l.Keys = append(l.Keys, k)
		}
	}
	slices.Sort(l.Keys)
	slices.Sort(l.Prefixes)
	return l, nil
}

func (s *memStore) Stat(_ context.Context, key string) (storage.Attrs, error) {
	b, err := s.get(key)
	if err != nil {
		return storage.Attrs{}, err
	}
	return storage.Attrs{Size: int64(len(b))}, nil
}

func (s *memStore) Walk(_ context.Context, prefix string, fn func(string, storage.Attrs) error) error {
	s.mu.Lock()
	keys := make([]string, 0, len(s.m))
	sizes := make([]int64, 0, len(s.m))
	for k, v := range s.m {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
			sizes = append(sizes, int64(len(v)))
		}
	}
	s.mu.Unlock()
	for i, k := range keys {
		if err := fn(k, storage.Attrs{Size: sizes[i]}); err != nil {
			return err
		}
	}
	return nil
}

func (s *memStore) Close() error { return nil }

// files returns the store's keys under prefix (prefix stripped).
func (s *memStore) files(prefix string) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range s.m {
		if strings.HasPrefix(k, prefix) {
			out[k[len(prefix):]] = v
		}
	}
	return out
}

var testZstd, _ = zstd.NewReader(nil)

// readBlob decodes the uint8 blob array at path in files.
func readBlob(t testing.TB, files map[string][]byte, path string) []byte {
	t.Helper()
	raw, ok := files[path+"/zarr.json"]
	if !ok {
		t.Fatalf("no blob array %s", path)
	}
	var meta struct {
		Shape  []int `json:"shape"`
		Codecs []struct {
			Name string `json:"name"`
		} `json:"codecs"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	n := meta.Shape[0]
	data, ok := files[path+"/c/0"]
	if !ok {
		return make([]byte, n)
	}
	for _, c := range slices.Backward(meta.Codecs) {
		switch c.Name {
		case "bytes":
		case "zstd":
			var err error
			if data, err = testZstd.DecodeAll(data, nil); err != nil {
				t.Fatalf("%s: zstd: %v", path, err)
			}
		case "blosc":
			var err error
			if data, err = blosc.Decode(nil, data); err != nil {
				t.Fatalf("%s: blosc: %v", path, err)
			}
		default:
			t.Fatalf("%s: test cannot decode codec %s", path, c.Name)
		}
	}
	if len(data) != n {
		t.Fatalf("%s: %d bytes, shape %d", path, len(data), n)
	}
	return data
}

// chunkKeys lists the chunk keys under an array path, sorted by coords.
func chunkKeys(files map[string][]byte, array string) []string {
	seen := map[string]bool{}
	for k := range files {
		if rest, ok := strings.CutPrefix(k, array+"/"); ok {
			if i := strings.IndexByte(rest, '/'); i > 0 && strings.Contains(rest[:i], ".") {
				seen[rest[:i]] = true
			}
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return slices.Compare(parseKey(a), parseKey(b)) })
	return keys
}

func parseKey(k string) []int64 {
	var out []int64
	for _, p := range strings.Split(k, ".") {
		v, _ := strconv.ParseInt(p, 10, 64)
		out = append(out, v)
	}
	return out
}

func f32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func i64s(b []byte) []int64 {
	out := make([]int64, len(b)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

// decodeFragments decodes a fragment index with the fragindex package and
// checks the 0.7 writer invariant: ranges only, tiling the rows in order.
func decodeFragments(t testing.TB, b []byte) []int64 {
	t.Helper()
	x, err := fragindex.Decode(b, -1)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, x.Len())
	var next int64
	for f := range out {
		s, c, ok := x.Range(f)
		if !ok || s != next {
			t.Fatalf("fragment %d is not the next range (start %d, want %d)", f, s, next)
		}
		out[f] = c
		next += c
	}
	return out
}

// readManifests decodes object_index/manifests of a level (vlen package
// for the framing, manifest package for each blob): per object, the
// (chunk, fragment) blocks.
func readManifests(t testing.TB, files map[string][]byte, lp string, d int) [][]blockRef {
	t.Helper()
	var meta struct {
		Shape []int `json:"shape"`
		Grid  struct {
			Config struct {
				Chunk []int `json:"chunk_shape"`
			} `json:"configuration"`
		} `json:"chunk_grid"`
	}
	raw, ok := files[lp+"/object_index/manifests/zarr.json"]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	var out [][]blockRef
	for c := 0; len(out) < meta.Shape[0]; c++ {
		b, err := testZstd.DecodeAll(files[lp+"/object_index/manifests/c/"+strconv.Itoa(c)], nil)
		if err != nil {
			t.Fatal(err)
		}
		items, err := vlen.VlenBytes{}.Decode(b, meta.Grid.Config.Chunk[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range items[:min(len(items), meta.Shape[0]-len(out))] {
			blocks, err := manifest.Decode(item, d)
			if err != nil {
				t.Fatal(err)
			}
			var refs []blockRef
			for _, bl := range blocks {
				if bl.Mode != manifest.ModeSingle {
					t.Fatalf("manifest mode %d", bl.Mode)
				}
				var r blockRef
				copy(r.c[:], bl.Chunk)
				r.frag = bl.Start
				refs = append(refs, r)
			}
			out = append(out, refs)
		}
	}
	return out
}
