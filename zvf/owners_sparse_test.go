package zvf_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zarr"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// countingStore counts the reads of keys under prefix and, past max,
// cancels the test's context: a build that visits every declared
// manifest chunk is stopped by the work it does, not by a clock.
type countingStore struct {
	storage.Store
	prefix string
	max    int64
	n      atomic.Int64
	stop   context.CancelFunc
}

func (c *countingStore) Get(ctx context.Context, key string, o storage.ReadOptions) (storage.Object, error) {
	if strings.HasPrefix(key, c.prefix) && c.n.Add(1) > c.max {
		c.stop()
	}
	return c.Store.Get(ctx, key, o)
}

// TestOwnersOfSparseManifestsAreBoundedByWhatIsStored: a store may
// declare 2^40 objects and store manifests for its first 200 only (the
// other chunks read as the fill value, an empty manifest). The owners map
// every bbox of the level builds used to visit every declared row — some
// 5.5 billion chunk reads, a core per request until the request timed out
// — and the next request started over. Its work now follows the chunks
// stored: the answer (the owners of every row) is the undamaged store's,
// after a handful of manifest reads.
func TestOwnersOfSparseManifestsAreBoundedByWhatIsStored(t *testing.T) {
	t.Parallel()
	src := filepath.Join(fixtures, "polylines.zarrvectors")
	want, err := ownersByBBox(t, context.Background(), zvftest.Store(t, src))
	if err != nil {
		t.Fatal(err)
	}

	dir := zvftest.CopyTree(t, src)
	const huge = int64(1) << 40
	editJSON(t, filepath.Join(dir, "0", "object_index", "zarr.json"), func(m map[string]any) {
		m["attributes"].(map[string]any)["num_objects"] = huge
	})
	editJSON(t, filepath.Join(dir, "0", "object_index", "manifests", "zarr.json"), func(m map[string]any) {
		m["shape"] = []int64{huge} // chunk_shape stays 200: one chunk stored, 5.5e9 declared
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// One stored chunk, and one read where the missing ones begin (the
	// version check of a missing chunk); a few more leave room for the
	// cache's retries without letting the loop run.
	cs := &countingStore{Store: zvftest.Store(t, dir), prefix: "0/object_index/manifests/c/", max: 8, stop: cancel}
	got, err := ownersByBBox(t, ctx, cs)
	if n := cs.n.Load(); n > cs.max {
		t.Fatalf("the owners map read %d manifest chunks (stopped past %d: %v) for a store with 1 stored", n, cs.max, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("owners of the box's rows: %d ids, want the undamaged store's %d\n got %v\nwant %v", len(got), len(want), got, want)
	}
	t.Logf("%d manifest chunk reads", cs.n.Load())
}

// ownersByBBox is the object id of every row of a box holding the whole
// of level 0, in answer order.
func ownersByBBox(t *testing.T, ctx context.Context, st storage.Store) ([]int64, error) {
	t.Helper()
	s, err := zvf.Open(ctx, st, zvf.Options{Name: "p", Cache: cache.New(64 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Level(0)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	q := zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}}
	if _, err := l.BBox(ctx, q, func(b *zvf.Batch) error {
		ids = append(ids, b.ObjectIDs...)
		return nil
	}); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		t.Fatal("the box holds no rows with object ids")
	}
	return ids, nil
}

func editJSON(t *testing.T, p string, edit func(map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOwnersOfAFillNamingFragmentsAreRefusedPromptly: the manifests'
// fill value is what every missing row holds, and a hostile one may name
// a fragment. 2^40 rows naming it pass the owners map's bound on
// mentions (an array read whole): refused as before, with a typed error,
// found by counting what the missing rows would add, not by visiting them.
func TestOwnersOfAFillNamingFragmentsAreRefusedPromptly(t *testing.T) {
	t.Parallel()
	dir := zvftest.CopyTree(t, filepath.Join(fixtures, "polylines.zarrvectors"))
	const huge = int64(1) << 40
	editJSON(t, filepath.Join(dir, "0", "object_index", "zarr.json"), func(m map[string]any) {
		m["attributes"].(map[string]any)["num_objects"] = huge
	})
	// One block: chunk (0,0,0), mode 0, fragment 0.
	fill := binary.LittleEndian.AppendUint32(nil, 1)
	fill = append(fill, make([]byte, 3*8+1+8)...)
	list := make([]int, len(fill))
	for i, b := range fill {
		list[i] = int(b)
	}
	editJSON(t, filepath.Join(dir, "0", "object_index", "manifests", "zarr.json"), func(m map[string]any) {
		m["shape"] = []int64{huge}
		m["fill_value"] = list
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := &countingStore{Store: zvftest.Store(t, dir), prefix: "0/object_index/manifests/c/", max: 8, stop: cancel}
	_, err := ownersByBBox(t, ctx, cs)
	if n := cs.n.Load(); n > cs.max {
		t.Fatalf("the owners map read %d manifest chunks (stopped past %d: %v) for a store with 1 stored", n, cs.max, err)
	}
	if !errors.Is(err, zvf.ErrUnsupported) {
		t.Fatalf("err %v; want the owners map refused as too large", err)
	}
}

// TestOwnersOfSparseManifestsMatchEachManifest: with the manifests cut
// into chunks of 16 rows of which a few are stored (runs of missing
// chunks between them and 2^40 declared rows after), every row's owner
// is what the stored manifests say, read one object at a time
// (Level.Manifest, which does not use the owners map): the first object
// naming the lowest fragment that holds the row, -1 for none.
func TestOwnersOfSparseManifestsMatchEachManifest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := zvftest.CopyTree(t, filepath.Join(fixtures, "polylines.zarrvectors"))
	const huge, cs = int64(1) << 40, 16
	kept := []int64{0, 2, 5, 12} // chunk 12 holds rows 192-199, and 8 rows past the fixture's
	w := zvftest.Store(t, dir)
	codecs := zarr.NewCodecs(zarr.Limits{})
	const p = "0/object_index/manifests"
	orig, err := zarr.OpenArray(ctx, w, p, codecs)
	if err != nil {
		t.Fatal(err)
	}
	all, err := orig.ReadChunk(ctx, []int64{0})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Delete(ctx, orig.ChunkKey([]int64{0})); err != nil {
		t.Fatal(err)
	}
	m := *orig.Meta()
	m.Shape, m.ChunkShape = []int64{huge}, []int64{cs}
	arr, err := zarr.CreateArray(ctx, w, p, &m, codecs)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64 // the objects whose manifests are stored
	for _, c := range kept {
		elems := make([][]byte, cs)
		for i := range elems {
			if row := c*cs + int64(i); row < int64(len(all.Elems)) {
				elems[i] = all.Elems[row]
				ids = append(ids, row)
			} else {
				elems[i] = []byte{}
			}
		}
		if err := arr.WriteChunk(ctx, w, []int64{c}, &zarr.Chunk{Shape: m.ChunkShape, Type: m.DataType, Elems: elems}); err != nil {
			t.Fatal(err)
		}
	}
	editJSON(t, filepath.Join(dir, "0", "object_index", "zarr.json"), func(m map[string]any) {
		m["attributes"].(map[string]any)["num_objects"] = huge
	})

	s, err := zvf.Open(ctx, w, zvf.Options{Name: "p", Cache: cache.New(64 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Level(0)
	if err != nil {
		t.Fatal(err)
	}
	type frag struct {
		ks string
		f  int64
	}
	owner := map[frag]int64{}
	rows := map[frag][]int64{}
	for _, id := range ids { // ascending: the first to name a fragment owns it
		mf, err := l.Manifest(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range mf.Blocks {
			for _, fr := range b.Fragments {
				k := frag{b.Chunk.String(), fr.Fragment}
				if _, ok := owner[k]; ok {
					continue
				}
				owner[k] = id
				if fr.Range != nil {
					for r := fr.Range[0]; r < fr.Range[0]+fr.Range[1]; r++ {
						rows[k] = append(rows[k], r)
					}
				} else {
					rows[k] = fr.Rows
				}
			}
		}
	}
	named := 0
	for _, key := range l.Keys() {
		got, err := l.ChunkObjects(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]int64, len(got))
		for i := range want {
			want[i] = -1
		}
		var frags []frag
		for k := range owner {
			if k.ks == key.String() {
				frags = append(frags, k)
			}
		}
		slices.SortFunc(frags, func(a, b frag) int { return int(a.f - b.f) })
		for _, k := range frags {
			for _, r := range rows[k] {
				if want[r] < 0 {
					want[r] = owner[k]
					named++
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("chunk %s: owners\n got %v\nwant %v", key, got, want)
		}
	}
	if named == 0 {
		t.Fatal("no row has an owner: the test checks nothing")
	}
}

// TestValidateOfSparseManifestsIsBoundedByWhatIsStored: `zvfserve
// validate` checks every object's manifest. It visited the rows
// num_objects declares, one by one: on a store declaring 2^40 objects
// with 200 stored it ran for days (and a problem per row would have
// filled memory). It now follows what is stored, as the owners map does,
// and still counts every declared object as checked.
func TestValidateOfSparseManifestsIsBoundedByWhatIsStored(t *testing.T) {
	t.Parallel()
	src := filepath.Join(fixtures, "polylines.zarrvectors")
	dir := zvftest.CopyTree(t, src)
	const huge = int64(1) << 40
	editJSON(t, filepath.Join(dir, "0", "object_index", "zarr.json"), func(m map[string]any) {
		m["attributes"].(map[string]any)["num_objects"] = huge
	})
	editJSON(t, filepath.Join(dir, "0", "object_index", "manifests", "zarr.json"), func(m map[string]any) {
		m["shape"] = []int64{huge}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := &countingStore{Store: zvftest.Store(t, dir), prefix: "0/object_index/manifests/c/", max: 8, stop: cancel}
	rep := zvf.Validate(ctx, cs, "p", 5, nil)
	if n := cs.n.Load(); n > cs.max {
		t.Fatalf("validate read %d manifest chunks (stopped past %d) for a store with 1 stored", n, cs.max)
	}
	if rep.Objects < huge {
		t.Errorf("validate counted %d objects checked, the store declares %d", rep.Objects, huge)
	}
	for _, p := range rep.Problems {
		if strings.Contains(p.Message, "manifest") {
			t.Errorf("a problem with the manifests of an undamaged store: %+v", p)
		}
	}
}
