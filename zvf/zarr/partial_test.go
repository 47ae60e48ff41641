package zarr_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zarr"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// countingStore counts the bytes the reader fetches.
type countingStore struct {
	storage.Store
	bytes, gets atomic.Int64
}

func (c *countingStore) Get(ctx context.Context, k string, o storage.ReadOptions) (storage.Object, error) {
	obj, err := c.Store.Get(ctx, k, o)
	c.bytes.Add(int64(len(obj.Data)))
	if o.Off == 0 && o.Len < 0 {
		c.gets.Add(1)
	}
	return obj, err
}

// TestReadInnerChunk: every inner chunk read by range equals the same
// region of a whole-array read, and one inner chunk costs far fewer bytes
// than its shard.
func TestReadInnerChunk(t *testing.T) {
	ctx := context.Background()
	paths, _ := filepath.Glob(filepath.Join(corpus, "sharding", "*.zarr"))
	tested := 0
	for _, p := range paths {
		st := zvftest.Store(t, p)
		cs := &countingStore{Store: st}
		a, err := zarr.OpenArray(ctx, cs, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if !a.Sharded() {
			continue
		}
		whole, err := a.ReadChunk(ctx, make([]int64, len(a.Meta().Shape)))
		if err != nil {
			t.Fatal(err)
		}
		shardBytes := cs.bytes.Load()
		inner := a.InnerChunkShape()
		size := int64(a.Meta().DataType.Size)
		// Compare inner chunk (0,…,0, last) of shard 0 with the whole shard.
		coords := make([]int64, len(inner))
		cs.bytes.Store(0)
		c, err := a.ReadInnerChunk(ctx, make([]int64, len(inner)), coords)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if got := cs.bytes.Load(); got >= shardBytes && shardBytes > 256 {
			t.Errorf("%s: inner read fetched %d bytes, the shard is %d", filepath.Base(p), got, shardBytes)
		}
		// row-major walk of the first inner chunk inside the shard
		shape := a.Meta().ChunkShape
		for i := int64(0); i < c.Len(); i++ {
			idx, rem := int64(0), i
			sub := make([]int64, len(inner))
			for d := len(inner) - 1; d >= 0; d-- {
				sub[d] = rem % inner[d]
				rem /= inner[d]
			}
			for d := range sub {
				idx = idx*shape[d] + sub[d]
			}
			if string(c.Data[i*size:(i+1)*size]) != string(whole.Data[idx*size:(idx+1)*size]) {
				t.Fatalf("%s: element %d differs", filepath.Base(p), i)
			}
		}
		tested++
	}
	if tested < 5 {
		t.Fatalf("only %d sharded arrays tested", tested)
	}
}
