package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

var coldStore struct {
	once sync.Once
	dir  string
	err  error
}

// coldStoreDir writes the 2,000,000-point benchmark store to a folder on
// local disk once, and reuses it in later runs (like bench --store): it
// is written beside its final name and renamed into place.
func coldStoreDir(b *testing.B) string {
	coldStore.once.Do(func() {
		final := filepath.Join(os.TempDir(), "zvfserve-bench-coldquery-v1")
		coldStore.dir = filepath.Join(final, "points")
		if _, err := os.Stat(filepath.Join(coldStore.dir, "zarr.json")); err == nil {
			return
		}
		ctx := context.Background()
		st, err := synth.Points(ctx, 2_000_000, 1, writer.CodecNone)
		if err != nil {
			coldStore.err = err
			return
		}
		defer st.Close()
		tmp, err := os.MkdirTemp(os.TempDir(), ".zvfserve-bench-coldquery-")
		if err != nil {
			coldStore.err = err
			return
		}
		defer os.RemoveAll(tmp)
		err = st.Walk(ctx, "points/", func(key string, a storage.Attrs) error {
			data, err := storage.ReadAll(ctx, st, key, a.Size)
			if err != nil {
				return err
			}
			p := filepath.Join(tmp, filepath.FromSlash(key))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			return os.WriteFile(p, data, 0o644)
		})
		if err == nil {
			err = os.Rename(tmp, final)
		}
		coldStore.err = err
	})
	if coldStore.err != nil {
		b.Fatal(coldStore.err)
	}
	return coldStore.dir
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

// BenchmarkColdBBoxHTTP: one cold 500k-vertex binary bbox over HTTP from a
// fresh server (store opened, cache empty), beside the static-file client
// of bench --static fetching and filtering the same box's vertex files.
func BenchmarkColdBBoxHTTP(b *testing.B) {
	dir := coldStoreDir(b)
	ctx := context.Background()
	st, err := blobstore.Open(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	defer client.CloseIdleConnections()
	lo, hi := synth.BoxFor(2_000_000, 500_000, 50)
	bufs := new(staticBuffers)
	b.Run("zvfserve", func(b *testing.B) {
		var total time.Duration
		for b.Loop() {
			d, n, _, err := serverCold(ctx, client, st, lo, hi, nil, bufs)
			if err != nil || n == 0 {
				b.Fatal(n, err)
			}
			total += d
		}
		// ns/op includes opening the store and starting the server;
		// this is the request alone.
		b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "query-ms")
	})
	b.Run("static", func(b *testing.B) {
		files, stop, err := serveObjects(st, dir, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer stop()
		lay, err := staticOpen(ctx, client, files)
		if err != nil {
			b.Fatal(err)
		}
		var total time.Duration
		for b.Loop() {
			d, n, _, _, err := staticCold(ctx, client, files, lay, lo, hi, bufs)
			if err != nil || n == 0 {
				b.Fatal(n, err)
			}
			total += d
		}
		b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "query-ms")
	})
}
