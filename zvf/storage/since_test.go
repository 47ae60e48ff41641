package storage_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/metered"
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

// panicky is a Store whose reads panic.
type panicky struct{ storage.Store }

func (panicky) Get(context.Context, string, storage.ReadOptions) (storage.Object, error) {
	panic("read")
}

// TestStartIsGet: a read started (storage.Start, or with others in
// order: storage.StartAll) and collected answers what Get answers, through every view that forwards it (Sub, Since,
// metered) and through a store that is no Starter (a goroutine of its
// own): the same bytes and version, a missing key, a link out of the
// store refused, an object written after a Since view's moment a change.
// A read that panics is an error, not a crash.
func TestStartIsGet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, outside := t.TempDir(), t.TempDir()
	st := zvftest.Store(t, dir)
	for _, k := range []string{"p/a", "p/old"} {
		if err := st.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "p", "escape")); err != nil {
		t.Fatal(err)
	}
	mark := st.Now().Add(time.Millisecond)
	later := mark.Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "p", "a"), later, later); err != nil {
		t.Fatal(err)
	}
	views := map[string]storage.Store{
		"localfs":       st,
		"sub":           storage.Sub(st, "p"),
		"since":         storage.Since(storage.Sub(st, "p"), mark),
		"metered":       metered.Wrap(storage.Sub(st, "p"), nopObserver{}),
		"not a starter": struct{ storage.Store }{storage.Sub(st, "p")},
	}
	for name, v := range views {
		prefix := ""
		if name == "localfs" {
			prefix = "p/"
		}
		if _, ok := v.(storage.Starter); ok == (name == "not a starter") {
			t.Fatalf("%s: Starter %v", name, ok)
		}
		keys := []string{"a", "old", "missing", "escape", "../up"}
		var rs []storage.Read
		for _, key := range keys {
			rs = append(rs, storage.Read{Key: prefix + key, Opt: storage.Whole(100)})
		}
		all := storage.StartAll(ctx, v, rs)
		for i, key := range keys {
			want, werr := v.Get(ctx, prefix+key, storage.Whole(100))
			for how, wait := range map[string]func() (storage.Object, error){
				"started": storage.Start(ctx, v, prefix+key, storage.Whole(100)), "started with the others": all[i]} {
				got, gerr := wait()
				if string(got.Data) != string(want.Data) || got.Attrs != want.Attrs || (gerr == nil) != (werr == nil) ||
					gerr != nil && gerr.Error() != werr.Error() {
					t.Errorf("%s %s %s: %q %v %v; Get %q %v %v", name, key, how, got.Data, got.Attrs, gerr, want.Data, want.Attrs, werr)
				}
			}
			gerr := werr
			switch {
			case key == "missing" && !errors.Is(gerr, storage.ErrNotFound),
				key == "escape" && !errors.Is(gerr, storage.ErrOutside),
				key == "a" && (name == "since") != errors.Is(gerr, storage.ErrChanged),
				key == "old" && gerr != nil,
				key == "../up" && gerr == nil:
				t.Errorf("%s %s: %v", name, key, gerr)
			}
		}
	}
	if _, err := storage.Start(ctx, panicky{st}, "p/a", storage.Whole(100))(); err == nil {
		t.Error("a read that panicked: no error")
	}
}

type nopObserver struct{}

func (nopObserver) ObserveRead(int, time.Duration) {}
