package zvf_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/faultstore"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestHandleKeepsServingWhenTheCheckFails: a refresh whose listing fails
// changes nothing — the open store keeps answering from its cache — and
// a store that could not be reached at open is served as an
// unavailable-storage error until a refresh opens it.
func TestHandleKeepsServingWhenTheCheckFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := zvftest.Store(t, filepath.Join(fixtures, "graph.zarrvectors"))
	fs := faultstore.New(st, nil)
	down := &faultstore.Rule{Fault: faultstore.Fault{Err: storage.ErrUnavailable}}
	fs.Add(down)
	h, err := zvf.OpenHandle(ctx, fs, zvf.Options{Name: "graph", Cache: cache.New(16 << 20)}, zvf.Watch{Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Current(); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("backend down at open: %v", err)
	}
	fs.Reset()
	if changed, err := h.Refresh(ctx); !changed || err != nil {
		t.Fatalf("backend back: changed=%v err=%v", changed, err)
	}
	s, err := h.Current()
	if err != nil {
		t.Fatal(err)
	}
	v := s.Revision()
	fs.Add(&faultstore.Rule{Op: "stat", Fault: faultstore.Fault{Err: storage.ErrUnavailable}})
	if changed, err := h.Refresh(ctx); changed || !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("failed check: changed=%v err=%v", changed, err)
	}
	if s2, err := h.Current(); err != nil || s2 != s || s2.Revision() != v {
		t.Fatalf("a failed check replaced the store: %v", err)
	}
	fs.Reset()
	if changed, err := h.Refresh(ctx); changed || err != nil {
		t.Fatalf("unchanged store: changed=%v err=%v", changed, err)
	}
	l, err := s.Level(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.BBox(ctx, zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}}, func(*zvf.Batch) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// TestFingerprint: independent of listing order, moved by any change of a
// key, a size or a version.
func TestFingerprint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := zvftest.Store(t, "mem://fp")
	fp := func() string {
		t.Helper()
		s, err := zvf.Fingerprint(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	empty := fp()
	seen := map[string]string{empty: "empty"}
	for _, step := range []struct {
		name string
		do   func() error
	}{
		{"add a", func() error { return w.Put(ctx, "a", []byte("1")) }},
		{"add b/c", func() error { return w.Put(ctx, "b/c", []byte("2")) }},
		{"rewrite a, same size", func() error { return w.Put(ctx, "a", []byte("3")) }},
		{"grow b/c", func() error { return w.Put(ctx, "b/c", []byte("22")) }},
		{"delete a", func() error { return w.Delete(ctx, "a") }},
	} {
		if err := step.do(); err != nil {
			t.Fatal(err)
		}
		got := fp()
		if prev, dup := seen[got]; dup {
			t.Fatalf("%s: fingerprint equals the one after %q", step.name, prev)
		}
		seen[got] = step.name
		if fp() != got {
			t.Fatalf("%s: fingerprint not stable", step.name)
		}
	}
	if err := w.Delete(ctx, "b/c"); err != nil {
		t.Fatal(err)
	}
	if fp() != empty {
		t.Fatal("an emptied store does not fingerprint like an empty one")
	}
}
