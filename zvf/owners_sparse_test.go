package zvf_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
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
