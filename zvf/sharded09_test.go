package zvf_test

import (
	"context"
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
