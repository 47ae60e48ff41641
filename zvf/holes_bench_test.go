package zvf_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// BenchmarkSettledHoleCheck: warm answers over one listed chunk (3.2.5) of
// a store that may change, once the listing check has nothing left to
// ask: "cells", the box's cells all known (the bits walked), and
// "relisted", after a listing taken again agreed (one atomic load); the
// check alone, and the answers that run it. Count
// runs the check since it covers every box answer; BBox ran it before.
func BenchmarkSettledHoleCheck(b *testing.B) {
	ctx := context.Background()
	box := zvf.CountQuery{Min: []float64{301, 201, 501}, Max: []float64{399, 299, 599}}
	all := zvf.CountQuery{Min: []float64{-1e6, -1e6, -1e6}, Max: []float64{1e6, 1e6, 1e6}}
	for _, state := range []string{"cells", "relisted"} {
		h, err := zvf.OpenHandle(ctx, zvftest.Store(b, filepath.Join(fixtures, "graph.zarrvectors")), zvf.Options{Name: "g", Cache: cache.New(64 << 20)}, zvf.Watch{Enabled: true})
		if err != nil {
			b.Fatal(err)
		}
		st, err := h.Current()
		if err != nil {
			b.Fatal(err)
		}
		l, err := st.Level(0)
		if err != nil {
			b.Fatal(err)
		}
		if state == "relisted" { // a box over every cell lists the level again
			if _, err := l.BBox(ctx, zvf.BBoxQuery{Min: all.Min, Max: all.Max}, func(*zvf.Batch) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
		if n, err := l.Count(ctx, box); err != nil || n != 1 {
			b.Fatalf("count over chunk 3.2.5: %d %v, want 1", n, err)
		}
		b.Run("Count/"+state, func(b *testing.B) {
			for b.Loop() {
				if _, err := l.Count(ctx, box); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("Check/"+state, func(b *testing.B) {
			for b.Loop() {
				if err := l.CheckHoles(ctx, box.Min, box.Max); err != nil {
					b.Fatal(err)
				}
			}
		})
		q := zvf.BBoxQuery{Min: box.Min, Max: box.Max}
		b.Run("BBox/"+state, func(b *testing.B) {
			for b.Loop() {
				if _, err := l.BBox(ctx, q, func(*zvf.Batch) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
		if err := h.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
