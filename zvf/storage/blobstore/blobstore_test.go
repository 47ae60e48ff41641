package blobstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore/bucket"
)

// gocloudMem names, among TestStores' targets, the adapter over gocloud's
// own in-memory bucket: the code path S3, GCS and Azure go through, which
// mem:// URLs no longer take.
const gocloudMem = "gocloud memblob"

func open(ctx context.Context, target string) (storage.Writer, error) {
	if target == gocloudMem {
		return bucket.New(memblob.OpenBucket(nil), nil), nil
	}
	return blobstore.Open(ctx, target)
}

func TestStores(t *testing.T) {
	ctx := context.Background()
	dir, dir2 := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir2, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{dir, "file://" + dir2 + "/sub", "mem://", "mem://bucket/prefix", gocloudMem} {
		t.Run(target, func(t *testing.T) {
			st, err := open(ctx, target)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := st.Close(); err != nil {
					t.Error(err)
				}
			}()
			put := map[string]string{"zarr.json": "{}", "a/zarr.json": "A", "a/c/0": "0123456789", "b/x/y": "y"}
			for k, v := range put {
				if err := st.Put(ctx, k, []byte(v)); err != nil {
					t.Fatal(err)
				}
			}
			got, err := st.Get(ctx, "a/c/0", storage.Whole(100))
			if err != nil || string(got.Data) != "0123456789" || got.Attrs.Size != 10 || got.Attrs.ETag == "" || got.Attrs.Modified.IsZero() {
				t.Fatalf("Get = %q %+v, %v", got.Data, got.Attrs, err)
			}
			for _, tc := range []struct {
				off, n, max int64
				want        string
			}{{2, 3, 3, "234"}, {8, 10, 10, "89"}, {0, -1, 10, "0123456789"}, {5, -1, 5, "56789"}, {10, -1, 1, ""}} {
				got, err := st.Get(ctx, "a/c/0", storage.ReadOptions{Off: tc.off, Len: tc.n, Max: tc.max})
				if err != nil || string(got.Data) != tc.want {
					t.Errorf("Get(%d,%d) = %q, %v; want %q", tc.off, tc.n, got.Data, err, tc.want)
				}
			}
			for _, o := range []storage.ReadOptions{storage.Whole(9), {Off: 1, Len: -1, Max: 8}} {
				if _, err := st.Get(ctx, "a/c/0", o); !errors.Is(err, storage.ErrTooLarge) {
					t.Errorf("Get %+v of 10 bytes: %v, want ErrTooLarge", o, err)
				}
			}
			if _, err := st.Get(ctx, "a/c/0", storage.ReadOptions{Len: -1}); err == nil {
				t.Errorf("a read without a bound succeeded")
			}
			if _, err := st.Get(ctx, "a/c/0", storage.ReadOptions{Len: -1, Max: 10, IfMatch: got.Attrs.ETag}); err != nil {
				t.Errorf("pinned read of the same version: %v", err)
			}
			if _, err := st.Get(ctx, "a/c/0", storage.ReadOptions{Len: -1, Max: 10, IfMatch: "other"}); !errors.Is(err, storage.ErrChanged) {
				t.Errorf("pinned read of another version: %v, want ErrChanged", err)
			}
			l, err := st.List(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(l.Keys, []string{"zarr.json"}) || !reflect.DeepEqual(l.Prefixes, []string{"a/", "b/"}) {
				t.Errorf("List root = %+v", l)
			}
			l, err = st.List(ctx, "a/")
			if err != nil || !reflect.DeepEqual(l.Keys, []string{"a/zarr.json"}) || !reflect.DeepEqual(l.Prefixes, []string{"a/c/"}) {
				t.Errorf("List a/ = %+v, %v", l, err)
			}
			if _, err := st.Get(ctx, "missing", storage.Whole(100)); !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("missing key: %v", err)
			}
			if _, err := st.Stat(ctx, "missing"); !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("Stat missing key: %v", err)
			}
			a, err := st.Stat(ctx, "a/c/0")
			if err != nil || a.Size != 10 || a.ETag == "" {
				t.Errorf("Stat = %+v, %v", a, err)
			}
			walk := func(prefix string) map[string]storage.Attrs {
				t.Helper()
				m := map[string]storage.Attrs{}
				if err := st.Walk(ctx, prefix, func(k string, a storage.Attrs) error { m[k] = a; return nil }); err != nil {
					t.Fatal(err)
				}
				return m
			}
			all := walk("")
			if len(all) != len(put) || all["a/c/0"].Size != 10 || all["b/x/y"].ETag == "" {
				t.Errorf("Walk = %+v", all)
			}
			if sub := walk("a/"); len(sub) != 2 || sub["a/zarr.json"].Size != 1 {
				t.Errorf("Walk a/ = %+v", sub)
			}
			if err := st.Put(ctx, "a/c/0", []byte("9876543210")); err != nil {
				t.Fatal(err)
			}
			if v := walk("a/")["a/c/0"].ETag; v == all["a/c/0"].ETag {
				// Same size, new content: an MD5 version changes, and so
				// does a local file's (it was renamed into place).
				t.Errorf("rewritten object kept its version %q", v)
			}
			stop := errors.New("stop")
			if err := st.Walk(ctx, "", func(string, storage.Attrs) error { return stop }); err != stop {
				t.Errorf("Walk did not return the callback's error: %v", err)
			}
			if err := st.Walk(ctx, "../", func(string, storage.Attrs) error { return nil }); err == nil {
				t.Errorf("Walk(../) succeeded")
			}
			for _, bad := range []string{"../x", "a/../../x", "/etc/passwd", "a/./b"} {
				if _, err := st.Get(ctx, bad, storage.Whole(100)); err == nil || errors.Is(err, storage.ErrNotFound) {
					t.Errorf("Get(%q) = %v, want an invalid-key error", bad, err)
				}
			}
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			if _, err := st.Get(cctx, "a/c/0", storage.Whole(100)); !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled Get: %v", err)
			}
			if err := st.Delete(ctx, "b/x/y"); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Get(ctx, "b/x/y", storage.Whole(100)); !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("after Delete: %v", err)
			}
		})
	}
}

func TestOpenMissingDir(t *testing.T) {
	if _, err := blobstore.Open(context.Background(), filepath.Join(t.TempDir(), "nope")); err == nil {
		t.Fatal("opening a missing directory succeeded")
	}
}

func TestNoSidecarFiles(t *testing.T) {
	dir := t.TempDir()
	st, err := blobstore.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(context.Background(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("dir holds %d entries, want only the key (no .attrs sidecar)", len(ents))
	}
}

// TestFolderMarkers: the empty "folder/" objects consoles and sync tools
// create are no objects: a listing of the folder shows no key for its
// own marker, a walk passes them, and a folder holding only a marker does
// not hold zarr.json; one flat listing finds the folders that do.
func TestFolderMarkers(t *testing.T) {
	t.Parallel()
	for _, target := range []string{gocloudMem, "mem://"} {
		t.Run(target, func(t *testing.T) { checkFolderMarkers(t, target) })
	}
}

func checkFolderMarkers(t *testing.T, target string) {
	ctx := context.Background()
	st, err := open(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for k, v := range map[string]string{
		"v/":                "",
		"v/zarr.json":       "{}",
		"v/1.0.0/zarr.json": "{}",
		"v/1.0.0/c/0":       "x",
		"v/2.0.0/":          "", // a marker alone
		"v/3.0.0/":          "",
		"v/3.0.0/c/0":       "x", // data without its zarr.json
		"v/4.0.0/zarr.json": "{}",
		"v/4.0.0/":          "",
	} {
		if err := st.Put(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	l, err := st.List(ctx, "v/2.0.0/")
	if err != nil || len(l.Keys)+len(l.Prefixes) != 0 {
		t.Errorf("List of a marker's folder = %+v, %v; want nothing", l, err)
	}
	l, err = st.List(ctx, "v/")
	if want := []string{"v/1.0.0/", "v/2.0.0/", "v/3.0.0/", "v/4.0.0/"}; err != nil || !reflect.DeepEqual(l.Keys, []string{"v/zarr.json"}) || !reflect.DeepEqual(l.Prefixes, want) {
		t.Errorf("List v/ = %+v, %v", l, err)
	}
	var walked []string
	if err := st.Walk(ctx, "", func(k string, _ storage.Attrs) error { walked = append(walked, k); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"v/1.0.0/c/0", "v/1.0.0/zarr.json", "v/3.0.0/c/0", "v/4.0.0/zarr.json", "v/zarr.json"}; !reflect.DeepEqual(walked, want) {
		t.Errorf("Walk = %q, want %q", walked, want)
	}
	got, err := storage.FoldersHolding(ctx, st, "v/", "zarr.json")
	if want := []string{"v/1.0.0/", "v/4.0.0/"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("FoldersHolding = %q, %v; want %q", got, err, want)
	}
	// Through a view rooted below the bucket, and the generic way.
	got, err = storage.FoldersHolding(ctx, storage.Sub(st, "v"), "", "zarr.json")
	if want := []string{"1.0.0/", "4.0.0/"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("FoldersHolding through Sub = %q, %v; want %q", got, err, want)
	}
	got, err = storage.FoldersHolding(ctx, struct{ storage.Store }{st}, "v/", "zarr.json")
	if want := []string{"v/1.0.0/", "v/4.0.0/"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("FoldersHolding through List and Stat = %q, %v; want %q", got, err, want)
	}
}

// TestMemListCostsItsAnswer: listing one folder of a mem:// store costs
// the folder, not the store. gocloud's in-memory bucket copied and sorted
// every key it held on each List, which made a listing of a store of n
// objects O(n log n) and a store's opening, one listing per folder,
// quadratic (the demo's start-up, the load benchmark).
func TestMemListCostsItsAnswer(t *testing.T) {
	ctx := context.Background()
	st, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 5000 {
		if err := st.Put(ctx, fmt.Sprintf("f/%d/c/%d", i%50, i), []byte{1}); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(20, func() {
		if l, err := st.List(ctx, "f/7/"); err != nil || !reflect.DeepEqual(l.Prefixes, []string{"f/7/c/"}) {
			t.Fatalf("List = %+v, %v", l, err)
		}
	})
	// A listing of one child allocates its answer and little else.
	if allocs > 10 {
		t.Errorf("listing one folder of 5000 objects made %.0f allocations", allocs)
	}
}
