package storage_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestSinceLargerReplacement: an object replaced after t by one larger
// than the reader's bound (a chunk rewritten while its version's metadata,
// which sets the bound, still holds) is a change, not a too-large object:
// the version must be retried, not reported corrupt. An object that was
// already too large at t stays too large.
func TestSinceLargerReplacement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st := zvftest.Store(t, dir)
	if err := st.Put(ctx, "old", make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "grown", make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	// Both objects are stamped at or before Now, so strictly before mark.
	// The replacement is dated after mark by setting its time: written
	// right after a mark, a file's stamp comes from the kernel's coarse
	// clock and may fall before it (see localfs.Store.Now), which made
	// this test fail now and then when it waited for the mark to pass.
	mark := st.Now().Add(time.Millisecond)
	if err := st.Put(ctx, "grown", make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	later := mark.Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "grown"), later, later); err != nil {
		t.Fatal(err)
	}
	view := storage.Since(st, mark)
	if _, err := view.Get(ctx, "grown", storage.Whole(10)); !errors.Is(err, storage.ErrChanged) {
		t.Errorf("a replacement larger than the bound: %v, want ErrChanged", err)
	}
	if _, err := view.Get(ctx, "old", storage.Whole(10)); !errors.Is(err, storage.ErrTooLarge) || errors.Is(err, storage.ErrChanged) {
		t.Errorf("an object too large before the mark: %v, want ErrTooLarge", err)
	}
}
