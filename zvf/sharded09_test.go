package zvf_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// readLog records every read a store serves: key and bytes returned.
type readLog struct {
	storage.Store
	mu    sync.Mutex
	reads map[string][]int
}

func (r *readLog) Get(ctx context.Context, key string, ro storage.ReadOptions) (storage.Object, error) {
	obj, err := r.Store.Get(ctx, key, ro)
	r.mu.Lock()
	r.reads[key] = append(r.reads[key], len(obj.Data))
	r.mu.Unlock()
	return obj, err
}

func (r *readLog) take() map[string][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reads
	r.reads = map[string][]int{}
	return out
}

// TestSharded09ReadsRanges: a box over one chunk of a sharded 0.9 store
// reads the shard's index and then only its cell's byte range — never a
// whole shard — for the vertices and the fragment index alike; a box over
// another chunk of the same shard reads just its cells (the index is
// cached). The level's open may have read the shard's index already (it
// samples a chunk for its attributes' channels), in ranges too.
func TestSharded09ReadsRanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(fixtures09, "mesh_sharded_v09.zarrvectors")
	st := zvftest.Store(t, dir)
	log := &readLog{Store: st, reads: map[string][]int{}}
	l := zvftest.OpenLevel(t, log, zvf.Options{Name: "mesh_sharded_v09", Cache: cache.New(64 << 20)}, 0)
	opened := log.take()
	// Chunks 2.2.2 and then 1.1.1, both in shard 0/0/0.
	for _, round := range []struct {
		name     string
		min, max float64
		reads    int // per shard: index and cell, or the cell alone
	}{{"cold", 200, 299, 2}, {"index cached", 100, 199, 1}} {
		q := zvf.BBoxQuery{Min: []float64{round.min, round.min, round.min}, Max: []float64{round.max, round.max, round.max}}
		res, err := l.BBox(ctx, q, func(*zvf.Batch) error { return nil })
		if err != nil || res.Count == 0 {
			t.Fatalf("%s: %d rows, %v", round.name, res.Count, err)
		}
		got := log.take()
		for _, family := range []string{"vertices", "vertex_fragments"} {
			key := "0/" + family + "/c/0/0/0"
			fi, err := os.Stat(filepath.Join(dir, key))
			if err != nil {
				t.Fatal(err)
			}
			want := round.reads
			if round.name == "cold" && len(opened[key]) > 0 {
				want = 1 // the index was read as the level opened
			}
			if len(got[key]) != want {
				t.Errorf("%s: %d reads of %s, want %d: %v (at the open: %v)", round.name, len(got[key]), key, want, got, opened)
			}
			for _, n := range append(got[key], opened[key]...) {
				if int64(n) >= fi.Size() {
					t.Errorf("%s: a read of %d bytes of %s, a %d-byte shard", round.name, n, key, fi.Size())
				}
			}
		}
	}
}

// TestListedShardsOutsideTheGrid09: cells found by listing (no
// nonempty_chunks) come only from shards inside the array's grid, as they
// do from unsharded chunks: a shard file past the grid (left by a writer
// of a larger grid, or copied there) is none. Before, its index was read,
// and refused as outside the grid, so the store did not open; and a shard
// key so large that its first cell's index overflows int64 (2^61 shards of
// 4 cells) wrapped to a negative index that passed the grid test.
func TestListedShardsOutsideTheGrid09(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const name = "mesh_sharded_v09"
	st := memFixture09(t, name)
	editMemJSON(t, st, "0/vertices/zarr.json", func(doc map[string]any) {
		delete(doc["attributes"].(map[string]any), "nonempty_chunks")
	})
	want := zvftest.OpenLevel(t, st, zvf.Options{Name: name, Cache: cache.New(64 << 20)}, 0)
	shard, err := storage.ReadAll(ctx, st, "0/vertices/c/0/0/0", 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"0/vertices/c/3/0/0", "0/vertices/c/2305843009213693952/0/0", "0/vertices/c/0/4611686018427387904/1"} {
		if err := st.Put(ctx, k, shard); err != nil {
			t.Fatal(err)
		}
	}
	got := zvftest.OpenLevel(t, st, zvf.Options{Name: name, Cache: cache.New(64 << 20)}, 0)
	if len(got.Keys()) == 0 || fmt.Sprint(got.Keys()) != fmt.Sprint(want.Keys()) {
		t.Fatalf("chunks\n%v\nwant\n%v", got.Keys(), want.Keys())
	}
	res, err := got.BBox(ctx, zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Connectivity: true}, func(*zvf.Batch) error { return nil })
	if err != nil || res.Count == 0 {
		t.Fatalf("whole level: %d rows, %v", res.Count, err)
	}
}
