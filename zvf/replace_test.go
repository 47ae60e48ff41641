package zvf_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/demo"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// clockStore is a store with a clock the test moves: every object carries
// the clock's time when it was put, as an object store stamps uploads.
type clockStore struct {
	storage.Writer
	mu  sync.Mutex
	now time.Time
	mod map[string]time.Time
}

func newClockStore(t *testing.T) *clockStore {
	w := zvftest.Store(t, "mem://")
	return &clockStore{Writer: w, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), mod: map[string]time.Time{}}
}

func (c *clockStore) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clockStore) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *clockStore) modified(key string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mod[key]
}

func (c *clockStore) Put(ctx context.Context, key string, b []byte) error {
	c.mu.Lock()
	c.mod[key] = c.now
	c.mu.Unlock()
	return c.Writer.Put(ctx, key, b)
}

func (c *clockStore) Get(ctx context.Context, key string, o storage.ReadOptions) (storage.Object, error) {
	obj, err := c.Writer.Get(ctx, key, o)
	obj.Attrs.Modified = c.modified(key)
	return obj, err
}

func (c *clockStore) Stat(ctx context.Context, key string) (storage.Attrs, error) {
	a, err := c.Writer.Stat(ctx, key)
	a.Modified = c.modified(key)
	return a, err
}

func (c *clockStore) Walk(ctx context.Context, prefix string, fn func(string, storage.Attrs) error) error {
	return c.Writer.Walk(ctx, prefix, func(key string, a storage.Attrs) error {
		a.Modified = c.modified(key)
		return fn(key, a)
	})
}

// sceneObjects is the demo's cells store, key → bytes.
func sceneObjects(t *testing.T, seed int64, scale float64) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	mem := zvftest.Store(t, "mem://")
	infos, err := demo.Build(ctx, mem, demo.Options{Seed: seed, Scale: scale})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	sub := storage.Sub(mem, infos[0].Prefix)
	err = sub.Walk(ctx, "", func(key string, _ storage.Attrs) error {
		b, err := storage.ReadAll(ctx, sub, key, 1<<30)
		out[key] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// watchedCells opens the cells store in st as a watched handle and returns
// it, the version it serves and that version's whole box.
func watchedCells(t *testing.T, st storage.Store, settle time.Duration) (*zvf.Handle, *zvf.Store, []byte) {
	t.Helper()
	h, err := zvf.OpenHandle(context.Background(), st, zvf.Options{Name: "cells"}, zvf.Watch{Enabled: true, Settle: settle})
	if err != nil {
		t.Fatal(err)
	}
	s, err := h.Current()
	if err != nil {
		t.Fatal(err)
	}
	whole, err := wholeBox(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return h, s, whole
}

// wholeBox is every vertex of every level of s, or the first error.
func wholeBox(ctx context.Context, s *zvf.Store) ([]byte, error) {
	var out bytes.Buffer
	for _, n := range s.Levels() {
		l, err := s.Level(n)
		if err != nil {
			return nil, err
		}
		_, err = l.BBox(ctx, zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Attributes: []string{"*"}},
			func(b *zvf.Batch) error {
				out.Write(b.Vertices.Data)
				for _, a := range b.Attributes {
					out.Write(a.Data)
				}
				return nil
			})
		if err != nil {
			return nil, err
		}
	}
	return out.Bytes(), nil
}

// TestReplacementOpensOnlyWhenWhole: a store replaced object by object in
// key order (as aws s3 sync and rclone do), slowly enough that a level's
// metadata is older than --settle while the rest is still being written,
// then pruned of the old version's extra keys. Until the whole store has
// been quiet for Settle the handle keeps the old version (whose reads of
// new objects are refused); then it opens the new one, under the version
// a server started afterwards names it by. Before, the handle opened a
// version as soon as the metadata alone had been quiet: a mix of both
// versions' objects, whose answers matched neither (or were 422s), named
// by when each replica happened to look.
func TestReplacementOpensOnlyWhenWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const settle = 2 * time.Second
	v1, v2 := sceneObjects(t, 1, 0.4), sceneObjects(t, 2, 0.25)
	st := newClockStore(t)
	for _, k := range slices.Sorted(maps.Keys(v1)) {
		if err := st.Put(ctx, k, v1[k]); err != nil {
			t.Fatal(err)
		}
	}
	st.advance(time.Minute)
	h, s1, want1 := watchedCells(t, st, settle)
	var stale []string
	for k := range v1 {
		if _, ok := v2[k]; !ok {
			stale = append(stale, k)
		}
	}
	if len(stale) == 0 {
		t.Fatal("the new version has every key of the old one, so nothing is pruned")
	}
	// The upload: one put every 20 ms, checks (a revalidation, a request
	// that met a changed object) every 100 ms.
	steps := append(slices.Sorted(maps.Keys(v2)), slices.Sorted(slices.Values(stale))...)
	for i, k := range steps {
		st.advance(20 * time.Millisecond)
		var err error
		if b, ok := v2[k]; ok {
			err = st.Put(ctx, k, b)
		} else {
			err = st.Delete(ctx, k)
		}
		if err != nil {
			t.Fatal(err)
		}
		if i%5 != 0 {
			continue
		}
		if _, err := h.Refresh(ctx); err != nil {
			t.Fatalf("after %d of %d writes: refresh: %v", i+1, len(steps), err)
		}
		s, err := h.Current()
		if err != nil {
			t.Fatalf("after %d of %d writes: %v", i+1, len(steps), err)
		}
		if s != s1 {
			t.Fatalf("after %d of %d writes (%s), a new version opened while the store was still being written", i+1, len(steps), k)
		}
		got, err := wholeBox(ctx, s)
		if err != nil {
			if errors.Is(err, zvf.ErrChanged) {
				// The server retries on the new version: not open yet.
				if _, cerr := h.Changed(ctx, s, err); !errors.Is(cerr, zvf.ErrChanging) {
					t.Fatalf("after %d of %d writes: Changed: %v, want ErrChanging", i+1, len(steps), cerr)
				}
				continue
			}
			t.Fatalf("after %d of %d writes: the old version's answer failed with %v, not as changed", i+1, len(steps), err)
		}
		if !bytes.Equal(got, want1) {
			t.Fatalf("after %d of %d writes: an answer of neither version", i+1, len(steps))
		}
	}
	// Quiet now: within twice Settle (and a check or two) the new version
	// is served.
	var s2 *zvf.Store
	for waited := time.Duration(0); waited <= 2*settle+time.Second; waited += 250 * time.Millisecond {
		if _, err := h.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if s, err := h.Current(); err == nil && s != s1 {
			s2 = s
			break
		}
		st.advance(250 * time.Millisecond)
	}
	if s2 == nil {
		t.Fatalf("the new version did not open within %v of the last write", 2*settle+time.Second)
	}
	got, err := wholeBox(ctx, s2)
	if err != nil {
		t.Fatal(err)
	}
	_, s3, want2 := watchedCells(t, st, settle)
	if !bytes.Equal(got, want2) || bytes.Equal(want1, want2) {
		t.Fatal("the version opened after the replacement does not answer like the new store")
	}
	if s2.Revision() != s3.Revision() {
		t.Errorf("the same objects are version %s on the running handle and %s on a new one: replicas would disagree on ETags", s2.Revision(), s3.Revision())
	}
}
