package zvf_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
)

// keyCounter is a cache.Cache that counts lookups by key.
type keyCounter struct {
	*cache.Cache
	keyed atomic.Int64
}

func (c *keyCounter) Peek(key string) (any, bool) {
	c.keyed.Add(1)
	return c.Cache.Peek(key)
}

func (c *keyCounter) PeekRef(key string) (any, *cache.Ref, bool) {
	c.keyed.Add(1)
	return c.Cache.PeekRef(key)
}

// TestWarmBBoxFindsChunksByRef: a box answered again from cached chunks
// finds each through the Ref kept from the first time it was found in
// the cache, not by looking its key up (hashing and comparing a ~40-byte string per candidate
// chunk per request: a tenth of a warm answer's CPU); the answer is the
// same, and a chunk evicted since is found by key again.
func TestWarmBBoxFindsChunksByRef(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kc := &keyCounter{Cache: cache.New(256 << 20)}
	_, s := synthPoints(t, 50_000, 2, nil, kc)
	l, _ := s.Level(0)
	q := zvf.BBoxQuery{Min: []float64{100, 100, 100}, Max: []float64{700, 650, 900}}
	answer := func() (int64, int64) {
		before := kc.keyed.Load()
		res, err := l.BBox(ctx, q, func(*zvf.Batch) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		return res.Count, kc.keyed.Load() - before
	}
	n0, _ := answer() // reads the chunks
	// The first answer from the cache finds each chunk by key and keeps
	// its Ref; the next ones look no key up.
	for round := range 3 {
		n, keyed := answer()
		if n != n0 || (round > 0 && keyed != 0) || (round == 0 && keyed == 0) {
			t.Fatalf("warm answer %d: %d rows (cold %d), %d lookups by key", round, n, n0, keyed)
		}
	}
	// A Ref to an evicted chunk names nothing: the chunk is read and
	// found by key again.
	kc.Purge()
	for round := range 3 {
		n, keyed := answer()
		if n != n0 || (round == 2 && keyed != 0) || (round < 2 && keyed == 0) {
			t.Fatalf("answer %d after a purge: %d rows (want %d), %d lookups by key", round, n, n0, keyed)
		}
	}
}
