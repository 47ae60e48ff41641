package zvf_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// addFile writes path (creating its folders) until t ends, when it is
// removed again with the folders it needed, so that a store's copy that
// cases share is left as it was.
func addFile(t *testing.T, path, content string) {
	t.Helper()
	made := path
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		made = d
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(made); err != nil {
			t.Error(err)
		}
	})
}

// newerHint is what a store newer than the server is told to do.
const newerHint = "serve it with a newer zvfserve (zvfserve version says which this is), or write it with a version listed"

// TestRefused09: what this server does not read is refused at open with
// ErrUnsupported and a message naming the version, layout or capability
// (and, for the 0.8 layouts, the path that told them apart and what to
// do): unknown versions, the three 0.8 layouts, 0.9.4 dense manifests, an
// object index layout it does not know, and the split skeleton layout.
func TestRefused09(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	group := func(attrs string) string {
		return `{"zarr_format":3,"node_type":"group","attributes":` + attrs + `}`
	}
	version := func(v string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			mutate(t, filepath.Join(dir, "zarr.json"), func(b []byte) []byte {
				return []byte(strings.Replace(string(b), `"0.9.0"`, `"`+v+`"`, 1))
			})
		}
	}
	cross08 := func(attrs string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			version("0.8.0")(t, dir)
			addFile(t, filepath.Join(dir, "0/cross_chunk_links/0/zarr.json"), group(attrs))
		}
	}
	copies := map[string]string{}
	for _, tc := range []struct {
		name, store string
		change      func(t *testing.T, dir string)
		want        []string
	}{
		// A store newer than this server says what to do: it said only
		// "not supported" (a newer 0.9: which revisions it knew).
		{"a newer 0.9 revision", "graph_v09", version("0.9.7"), []string{`"0.9.7"`, "newer than the 0.9 revisions", "0.9.0–0.9.4", newerHint}},
		{"a major version", "graph_v09", version("1.0.0"), []string{`"1.0.0"`, "is newer than this server reads (0.6.x, 0.7.x and 0.9.0–0.9.4)", newerHint}},
		{"a newer minor version", "graph_v09", version("0.10.0"), []string{`"0.10.0"`, "is newer than this server reads", newerHint}},
		{"an older version", "graph_v09", version("0.5.0"), []string{`"0.5.0"`, "not supported", "0.6.x, 0.7.x and 0.9.0–0.9.4"}},
		{"not a version", "graph_v09", version("0.9.x"), []string{`"0.9.x"`, "not a version"}},
		{"0.8 of no known layout", "graph_v09", version("0.8.0"), []string{`"0.8.0"`, "ZVF 0.8 layout", "migrate the store to ZVF 0.9.0"}},
		{"0.8 partitioned_v1", "graph_v09", cross08(`{"layout":"partitioned_v1"}`), []string{"partitioned_v1", "0/cross_chunk_links/0", "migrate"}},
		{"0.8 sharded_v1", "graph_v09", cross08(`{"layout":"sharded_v1"}`), []string{"sharded_v1", "0/cross_chunk_links/0", "migrate"}},
		{"0.8 per-tuple cells", "graph_v09", cross08(`{"directed":false,"store":"canonical"}`), []string{"per-tuple cross-chunk link cells with perm_idx", "0/cross_chunk_links/0"}},
		{"0.8 capability", "graph_v09", func(t *testing.T, dir string) {
			version("0.8.1")(t, dir)
			mutate(t, filepath.Join(dir, "zarr.json"), func(b []byte) []byte {
				return []byte(strings.Replace(string(b), `"multiscale_links"`, `"partitioned_cross_chunk_links"`, 1))
			})
		}, []string{"partitioned_cross_chunk_links", `"0.8.1"`}},
		{"dense manifests", "graph_v09", func(t *testing.T, dir string) {
			version("0.9.4")(t, dir)
			mutate(t, filepath.Join(dir, "zarr.json"), func(b []byte) []byte {
				return []byte(strings.Replace(string(b), `"multiscale_links"`, `"dense_manifests"`, 1))
			})
		}, []string{`"dense_manifests"`, "0.9.4 dense object manifests"}},
		{"unknown object index layout", "points_pyramid_v09", func(t *testing.T, dir string) {
			mutate(t, filepath.Join(dir, "0/object_index/zarr.json"), func(b []byte) []byte {
				return []byte(strings.Replace(string(b), `"vlen_manifests_v1"`, `"dense_manifests_v1"`, 1))
			})
		}, []string{`layout "dense_manifests_v1" is not read`, "object_index"}},
		{"split skeleton", "skeleton_v09", func(t *testing.T, dir string) {
			mutate(t, filepath.Join(dir, "zarr.json"), func(b []byte) []byte {
				return []byte(strings.Replace(string(b), zvf.SkeletonLinked, zvf.SkeletonSplit, 1))
			})
		}, []string{zvf.SkeletonSplit, "stored in both chunks", "only linked_across_chunks"}},
		// Later 0.9.x revisions may store cross-chunk links as int32
		// (zvf-0.9-format §6), whose cell bytes the digest does not give:
		// refused by name — the array, its dtype, what is read — not read
		// as int64 rows of the wrong width.
		{"int32 cross-chunk links", "graph_v09", func(t *testing.T, dir string) {
			mutate(t, filepath.Join(dir, "0/links/0/0.0.+1/zarr.json"), func(b []byte) []byte {
				return []byte(strings.Replace(string(b), `"dtype": "int64"`, `"dtype": "int32"`, 1))
			})
		}, []string{"links/0/0.0.+1", "0/links/0/0.0.+1/zarr.json", `dtype "int32"`, "only int64 link cells", "byte layout"}},
		{"unknown skeleton layout", "skeleton_v09", func(t *testing.T, dir string) {
			mutate(t, filepath.Join(dir, "zarr.json"), func(b []byte) []byte {
				return []byte(strings.Replace(string(b), zvf.SkeletonLinked, "braided", 1))
			})
		}, []string{`"braided" is not a layout this server knows`}},
	} {
		// The cases of a store share one copy in turn (each change is
		// undone when its case ends): copying a store cost more than
		// opening it.
		dir, ok := copies[tc.store]
		if !ok {
			dir = zvftest.CopyTree(t, filepath.Join(fixtures09, tc.store+".zarrvectors"))
			copies[tc.store] = dir
		}
		t.Run(tc.name, func(t *testing.T) {
			tc.change(t, dir)
			st := zvftest.Store(t, dir)
			_, err := zvf.Open(ctx, st, zvf.Options{Name: tc.store})
			var ze *zvf.Error
			if !errors.As(err, &ze) || !errors.Is(err, zvf.ErrUnsupported) {
				t.Fatalf("err = %v, want a *zvf.Error of kind unsupported", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
		})
	}
}

// TestOpenZarrV2: a Zarr v2 store (on disk, where listings hide dot files)
// is refused as unsupported with a sentence that says so, not as corrupt;
// a folder without any Zarr metadata stays "not a ZVF store".
func TestOpenZarrV2(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		files []string
		kind  error
		want  string
	}{
		{"v2 group", []string{".zgroup", ".zattrs"}, zvf.ErrUnsupported, "Zarr v2 store; ZVF needs Zarr v3"},
		{"v2 array", []string{".zarray"}, zvf.ErrUnsupported, "Zarr v2 store; ZVF needs Zarr v3"},
		{"v2 attributes only", []string{".zattrs"}, zvf.ErrUnsupported, "Zarr v2 store; ZVF needs Zarr v3"},
		{"no metadata", []string{"readme.txt"}, zvf.ErrCorrupt, "no root zarr.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, f), []byte(`{"zarr_format": 2}`), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			st := zvftest.Store(t, dir)
			_, err := zvf.Open(context.Background(), st, zvf.Options{Name: "old"})
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a %v error saying %q", err, tc.kind, tc.want)
			}
		})
	}
}
