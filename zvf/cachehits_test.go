package zvf_test

import (
	"context"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
)

// TestWarmBBoxCountsHits: a warm answer, which counts its cache hits once
// rather than per chunk, still counts one hit per chunk it found, and
// level=auto's choice one per chunk it looked at; neither a miss.
func TestWarmBBoxCountsHits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ch := cache.New(256 << 20)
	_, s := synthPoints(t, 50_000, 3, nil, ch)
	l, _ := s.Level(0)
	q := zvf.BBoxQuery{Min: []float64{100, 100, 100}, Max: []float64{700, 650, 900}}
	answer := func() zvf.BBoxResult {
		res, err := l.BBox(ctx, q, func(*zvf.Batch) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	answer() // reads the chunks
	answer() // finds them by key, keeping their Refs
	for round := range 3 {
		before := ch.Stats()
		res := answer()
		after := ch.Stats()
		if res.Chunks == 0 || after.Hits-before.Hits != int64(res.Chunks) || after.Misses != before.Misses {
			t.Fatalf("warm answer %d: %d chunks, %d hits, %d misses", round, res.Chunks, after.Hits-before.Hits, after.Misses-before.Misses)
		}
	}
}
