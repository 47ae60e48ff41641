package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// coldStoreDir writes the 2,000,000-point benchmark store to a folder on
// local disk once, and reuses it in later runs (like zvfbench --store).
func coldStoreDir(b *testing.B) string {
	ctx := context.Background()
	dir := filepath.Join(os.TempDir(), "zvfserve-bench-coldquery-v1")
	if err := synth.OnDisk(ctx, dir, "points", func() (storage.Writer, error) {
		return synth.Points(ctx, 2_000_000, 1, writer.CodecNone)
	}); err != nil {
		b.Fatal(err)
	}
	return filepath.Join(dir, "points")
}

// BenchmarkQueryCold: zvfserve query on a store on local disk (page cache
// warm, nothing else cached): open the store, read the box's chunks and
// stream the answer — what a fresh process does after its start-up.
// Small: ≈10,000 vertices in binary; large: ≈540,000 vertices in JSON.
func BenchmarkQueryCold(b *testing.B) {
	dir := coldStoreDir(b)
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
