package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore/bucket"
	"github.com/zvfserve/zvfserve/zvf/storage/memstore"
)

// The contract every store keeps (bounded reads, listings, walks, versions,
// invalid keys) is checked by blobstore's TestStores, whose mem:// targets
// land here; these tests cover what is particular to the memory store.

// listModel is List computed the slow, obvious way from the set of keys.
func listModel(keys map[string]bool, prefix string) storage.Listing {
	var l storage.Listing
	seen := map[string]bool{}
	for k := range keys {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok || rest == "" {
			continue
		}
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			if d := prefix + rest[:i+1]; !seen[d] {
				seen[d] = true
				l.Prefixes = append(l.Prefixes, d)
			}
			continue
		}
		l.Keys = append(l.Keys, k)
	}
	sort.Strings(l.Keys)
	sort.Strings(l.Prefixes)
	return l
}

// TestListMatchesModel: after any sequence of puts, rewrites and deletes,
// List, Walk and FoldersHolding of every prefix give what the set of keys
// says. Names share prefixes with and without the slash ("a", "a/", "a0",
// "a.b") so that skipping a folder by binary search is tested at its edge.
func TestListMatchesModel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	segs := []string{"a", "a0", "a.b", "b", "zarr.json", "a-"}
	// Some keys are folder markers ("a/b/"), which show their folder in
	// its parent's listing and are otherwise no objects.
	r := rand.New(rand.NewPCG(1, 2))
	randKey := func() string {
		n := 1 + r.IntN(4)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = segs[r.IntN(len(segs))]
		}
		if r.IntN(5) == 0 {
			return strings.Join(parts, "/") + "/"
		}
		return strings.Join(parts, "/")
	}
	st := memstore.New()
	defer st.Close()
	keys := map[string]bool{}
	for step := range 400 {
		k := randKey()
		if r.IntN(4) == 0 {
			if err := st.Delete(ctx, k); err != nil {
				t.Fatal(err)
			}
			delete(keys, k)
		} else {
			if err := st.Put(ctx, k, []byte(k)); err != nil {
				t.Fatal(err)
			}
			keys[k] = true
		}
		if step%10 != 0 {
			continue // let puts pile up between listings
		}
		prefixes := map[string]bool{"": true}
		for k := range keys {
			for i := range len(k) {
				if k[i] == '/' {
					prefixes[k[:i+1]] = true
				}
			}
		}
		for p := range prefixes {
			got, err := st.List(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if want := listModel(keys, p); !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d: List(%q) = %+v, want %+v", step, p, got, want)
			}
			var walked, want []string
			if err := st.Walk(ctx, p, func(k string, a storage.Attrs) error {
				walked = append(walked, k)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			for k := range keys {
				if strings.HasPrefix(k, p) && !strings.HasSuffix(k, "/") {
					want = append(want, k)
				}
			}
			slices.Sort(want)
			if !slices.Equal(walked, want) {
				t.Fatalf("step %d: Walk(%q) = %q, want %q", step, p, walked, want)
			}
			holding, err := st.FoldersHolding(ctx, p, "zarr.json")
			if err != nil {
				t.Fatal(err)
			}
			var wantHolding []string
			for _, d := range listModel(keys, p).Prefixes {
				if keys[d+"zarr.json"] {
					wantHolding = append(wantHolding, d)
				}
			}
			if !slices.Equal(holding, wantHolding) {
				t.Fatalf("step %d: FoldersHolding(%q) = %q, want %q", step, p, holding, wantHolding)
			}
		}
	}
}

// TestStampsSeparateVersions: with a clock that stands still or goes
// back, objects written before Now still pass storage.Since at that
// moment and objects written after it are still refused, and every Put is
// a new version (ETag) even of the same bytes.
func TestStampsSeparateVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	clocks := map[string]func() func() time.Time{
		"still": func() func() time.Time { return func() time.Time { return base } },
		"back": func() func() time.Time {
			t := base
			return func() time.Time { t = t.Add(-time.Second); return t }
		},
	}
	for name, clock := range clocks {
		t.Run(name, func(t *testing.T) {
			st := memstore.NewWithClock(clock())
			defer st.Close()
			if err := st.Put(ctx, "old", []byte("x")); err != nil {
				t.Fatal(err)
			}
			v1, err := st.Stat(ctx, "old")
			if err != nil {
				t.Fatal(err)
			}
			at := st.Now()
			if err := st.Put(ctx, "new", []byte("x")); err != nil {
				t.Fatal(err)
			}
			view := storage.Since(st, at)
			if _, err := view.Get(ctx, "old", storage.Whole(1)); err != nil {
				t.Errorf("object written before Now refused: %v", err)
			}
			if _, err := view.Get(ctx, "new", storage.Whole(1)); !errors.Is(err, storage.ErrChanged) {
				t.Errorf("object written after Now: %v, want ErrChanged", err)
			}
			if err := st.Put(ctx, "old", []byte("x")); err != nil {
				t.Fatal(err)
			}
			v2, err := st.Stat(ctx, "old")
			if err != nil {
				t.Fatal(err)
			}
			if v2.ETag == v1.ETag || !v2.Modified.After(v1.Modified) {
				t.Errorf("rewrite kept version %+v (was %+v)", v2, v1)
			}
			if _, err := view.Stat(ctx, "old"); !errors.Is(err, storage.ErrChanged) {
				t.Errorf("rewritten object through the older view: %v, want ErrChanged", err)
			}
			if _, err := st.Get(ctx, "old", storage.ReadOptions{Len: -1, Max: 1, IfMatch: v1.ETag}); !errors.Is(err, storage.ErrChanged) {
				t.Errorf("read pinned to the replaced version: %v, want ErrChanged", err)
			}
		})
	}
}

// TestBytesAreCopies: the store keeps neither the caller's buffer (a
// writer reuses it for the next chunk) nor hands out its own.
func TestBytesAreCopies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()
	buf := []byte("abc")
	if err := st.Put(ctx, "k", buf); err != nil {
		t.Fatal(err)
	}
	buf[0] = 'X'
	got, err := st.Get(ctx, "k", storage.Whole(3))
	if err != nil || string(got.Data) != "abc" {
		t.Fatalf("Get = %q, %v; want the bytes as put", got.Data, err)
	}
	got.Data[1] = 'Y'
	if again, _ := st.Get(ctx, "k", storage.Whole(3)); string(again.Data) != "abc" {
		t.Errorf("changing a read's bytes changed the store: %q", again.Data)
	}
	if part, err := st.Get(ctx, "k", storage.Range(1, 1)); err != nil || string(part.Data) != "b" {
		t.Errorf("Range(1,1) = %q, %v", part.Data, err)
	}
}

// TestWalkMayWrite: Walk's callback runs outside the store's lock, so it
// can read and write the store (a copy into a sibling prefix) without a
// deadlock, and sees only the objects there when the walk began.
func TestWalkMayWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()
	for _, k := range []string{"src/a", "src/b/c"} {
		if err := st.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	var walked []string
	err := st.Walk(ctx, "", func(k string, a storage.Attrs) error {
		walked = append(walked, k)
		b, err := storage.ReadAll(ctx, st, k, a.Size)
		if err != nil {
			return err
		}
		return st.Put(ctx, "dst/"+k, b)
	})
	if err != nil || !slices.Equal(walked, []string{"src/a", "src/b/c"}) {
		t.Fatalf("Walk = %q, %v", walked, err)
	}
	if l, err := st.List(ctx, "dst/src/"); err != nil || !slices.Equal(l.Keys, []string{"dst/src/a"}) || !slices.Equal(l.Prefixes, []string{"dst/src/b/"}) {
		t.Errorf("List of the copy = %+v, %v", l, err)
	}
}

// TestRefusals: keys that are no objects, prefixes that are no folders,
// ended contexts and a closed store are typed errors, never a panic.
func TestRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := memstore.New()
	for _, k := range []string{"", "/", "/a", "a//", "a//b", "a/./b", "../a", "a\\b", "a\x00b"} {
		if err := st.Put(ctx, k, nil); err == nil {
			t.Errorf("Put(%q) accepted", k)
		}
		if _, err := st.Get(ctx, k, storage.Whole(1)); err == nil || errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want an invalid-key error", k, err)
		}
	}
	for _, p := range []string{"a", "/", "a//", "../"} {
		if _, err := st.List(ctx, p); err == nil {
			t.Errorf("List(%q) accepted", p)
		}
	}
	if err := st.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := st.List(cctx, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("List with an ended context: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, "k", storage.Whole(1)); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Get after Close: %v, want ErrUnavailable", err)
	}
	if err := st.Close(); err == nil {
		t.Errorf("second Close succeeded")
	}
}

// fill writes n keys spread over folders f/<i%100>/c/<i>, as a store's
// chunk folders are, into st.
func fill(b testing.TB, st storage.Writer, n int) {
	ctx := context.Background()
	for i := range n {
		if err := st.Put(ctx, fmt.Sprintf("f/%d/c/%d", i%100, i), []byte{1}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkList lists one small folder of a store of 100 000 objects:
// gocloud's bucket (copies and sorts every key on each call) against this
// store (a binary search per child).
func BenchmarkList(b *testing.B) {
	ctx := context.Background()
	stores := []struct {
		name string
		st   storage.Writer
	}{
		{"memstore", memstore.New()},
		{"gocloud", bucket.New(memblob.OpenBucket(nil), nil)},
	}
	for _, s := range stores {
		fill(b, s.st, 100_000)
		if _, err := s.st.List(ctx, ""); err != nil { // the index is sorted once after a batch of puts
			b.Fatal(err)
		}
		b.Run(s.name, func(b *testing.B) {
			for b.Loop() {
				if l, err := s.st.List(ctx, "f/7/"); err != nil || len(l.Prefixes) != 1 {
					b.Fatal(l, err)
				}
			}
		})
		s.st.Close()
	}
}
