package main

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/synth"
)

// BenchmarkQueryCold: zvfserve query on a store on local disk (page cache
// warm, nothing else cached): open the store, read the box's chunks and
// stream the answer — what a fresh process does after its start-up.
// Small: ≈10,000 vertices in binary; large: ≈540,000 vertices in JSON.
func BenchmarkQueryCold(b *testing.B) {
	dir, err := synth.ColdPoints(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		want int
		f    string
	}{
		{"small-bin", 10_000, "bin"},
		{"large-bin", 540_000, "bin"},
		{"large-json", 540_000, "json"},
	} {
		lo, hi := synth.BoxFor(2_000_000, c.want, 301)
		box := fmt.Sprintf("%g,%g,%g,%g,%g,%g", lo[0], lo[1], lo[2], hi[0], hi[1], hi[2])
		b.Run(c.name, func(b *testing.B) {
			var n int64
			for b.Loop() {
				w := &countWriter{w: io.Discard}
				if err := runQuery(context.Background(), []string{dir, "--bbox", box, "--f", c.f}, w, io.Discard); err != nil {
					b.Fatal(err)
				}
				n = w.n
			}
			b.ReportMetric(float64(n), "bytes/op")
		})
	}
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return c.w.Write(p) }
