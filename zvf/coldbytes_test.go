package zvf_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

// coldChunkSlack is what a cold bbox may allocate per chunk it reads
// beyond what it keeps of it: the chunk's file's metadata, its read, its
// cache entry's bookkeeping (about 6 KB a chunk when this was written).
const coldChunkSlack = 8 << 10

// TestColdBBoxAllocatesWhatItKeeps: a cold binary bbox (cache emptied,
// heap collected twice since the last query, as on a server whose live
// heap is small) allocates the chunks it keeps in the cache and little
// more: its matches' vertex buffers are not grown by doubling on the
// readers' goroutines, and its scratch, with the buffers it grew, is
// still there after the collections. Before, a 50,000-vertex box of
// 3,125-row chunks allocated 3.5 MB to keep 1.0 MB. Serial: it counts the
// process's allocations.
func TestColdBBoxAllocatesWhatItKeeps(t *testing.T) {
	alloctest.SkipUnderRace(t)
	ctx := context.Background()
	const n = 200_000
	st, err := synth.PointsChunked(ctx, n, 1, writer.CodecNone, 250) // 64 chunks of some 3,125 rows
	if err != nil {
		t.Fatal(err)
	}
	ch := cache.New(256 << 20)
	s, err := zvf.Open(ctx, storage.Sub(st, "points"), zvf.Options{Name: "points", Cache: ch})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := s.Level(0)
	for _, want := range []int{5_000, 50_000} {
		lo, hi := synth.BoxFor(n, want, 101)
		q := zvf.BBoxQuery{Min: lo, Max: hi, Wire: true} // the binary answer's query, no lender
		// answer: the answer's vertex bytes.
		var answer int64
		run := func() {
			res, err := l.BBox(ctx, q, func(*zvf.Batch) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			answer = 12 * res.Count
		}
		// The first box grows the scratch later ones reuse: its
		// matches' vertex buffers are each sized once, to what their
		// chunk can keep, not doubled up to it (as much again), and the
		// ring (64 KiB).
		ch.Purge()
		got := int64(alloctest.Bytes(run))
		st := ch.Stats()
		if limit := st.Bytes + coldChunkSlack*st.Items + answer*5/4 + 64<<10; got > limit {
			t.Errorf("the first cold box of %d vertices allocated %d bytes to keep %d in %d chunks (limit %d)", want, got, st.Bytes, st.Items, limit)
		}
		for range 3 {
			ch.Purge()
			runtime.GC()
			runtime.GC() // a sync.Pool's values survive one collection, not two
			got := int64(alloctest.Bytes(run))
			st := ch.Stats()
			if limit := st.Bytes + coldChunkSlack*st.Items; got > limit {
				t.Errorf("a cold box of %d vertices allocated %d bytes to keep %d in %d chunks (limit %d)", want, got, st.Bytes, st.Items, limit)
			}
		}
	}
}
