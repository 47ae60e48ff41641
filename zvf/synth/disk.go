package synth

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sync/errgroup"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// OnDisk writes the store build makes (under prefix name, as every builder
// here writes) to the folder dir/name, unless a store is there already, so
// that later runs reuse it. The store is copied into a hidden folder beside
// its final name and renamed into place, so an interrupted write never
// looks like a store to reuse; a folder dir/name that holds no store is an
// error rather than something to overwrite.
func OnDisk(ctx context.Context, dir, name string, build func() (storage.Writer, error)) error {
	final := filepath.Join(dir, name)
	if _, err := os.Stat(filepath.Join(final, "zarr.json")); err == nil {
		return nil
	}
	if _, err := os.Stat(final); err == nil {
		return fmt.Errorf("%s exists but holds no store (no zarr.json); remove it to rebuild", final)
	}
	mem, err := build()
	if err != nil {
		return err
	}
	defer mem.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(dir, "."+name+"-partial-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	disk, err := blobstore.Open(ctx, tmp)
	if err != nil {
		return err
	}
	err = copyStore(ctx, mem, disk)
	if cerr := disk.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(filepath.Join(tmp, name), final)
}

// copyStore copies every object of from into to. One walk lists them all
// (a delimited listing per folder costs a sort of the whole in-memory
// bucket each time), and a few writers overlap the file system calls.
func copyStore(ctx context.Context, from storage.Store, to storage.Writer) error {
	var keys []string
	if err := from.Walk(ctx, "", func(k string, _ storage.Attrs) error {
		keys = append(keys, k)
		return nil
	}); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, k := range keys {
		g.Go(func() error {
			b, err := storage.ReadAll(gctx, from, k, 1<<30)
			if err != nil {
				return err
			}
			return to.Put(gctx, k, b)
		})
	}
	return g.Wait()
}

// ColdPoints writes, once, the 2,000,000-point store that the cold-read
// benchmarks of zvfserve and zvfbench share to a folder under the system's
// temporary folder (OnDisk), and returns the store's folder.
func ColdPoints(ctx context.Context) (string, error) {
	dir := filepath.Join(os.TempDir(), "zvfserve-bench-coldquery-v1")
	if err := OnDisk(ctx, dir, "points", func() (storage.Writer, error) {
		return Points(ctx, 2_000_000, 1, writer.CodecNone)
	}); err != nil {
		return "", err
	}
	return filepath.Join(dir, "points"), nil
}
