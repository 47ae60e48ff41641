package zvftest

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/storage/localfs"
)

// Store opens urlOrPath as blobstore.Open does (a folder, or mem:// for a
// fresh store in memory) and closes it when tb ends: the open, check and
// close that most store tests begin with. A failure to open stops the
// test; a failure to close fails it.
func Store(tb testing.TB, urlOrPath string) storage.Writer {
	tb.Helper()
	return StoreWith(tb, urlOrPath, nil)
}

// StoreWith is Store that also opens the bucket URLs of d's schemes: a
// test that exercises a cloud driver names it, so that no other test
// links that driver's SDK.
func StoreWith(tb testing.TB, urlOrPath string, d blobstore.Drivers) storage.Writer {
	tb.Helper()
	st, err := d.Open(context.Background(), urlOrPath, localfs.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := st.Close(); err != nil {
			tb.Errorf("closing %s: %v", urlOrPath, err)
		}
	})
	return st
}

// ReadTree reads every file below the folder dir, by its slash-separated
// path relative to dir.
func ReadTree(tb testing.TB, dir string) map[string][]byte {
	tb.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// Upload copies the files below the folder dir into w, keyed as ReadTree
// names them.
func Upload(tb testing.TB, w storage.Writer, dir string) {
	tb.Helper()
	for k, b := range ReadTree(tb, dir) {
		if err := w.Put(context.Background(), k, b); err != nil {
			tb.Fatal(err)
		}
	}
}
