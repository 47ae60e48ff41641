package zvf_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/localfs"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// strayFolders are chunk folders that hold no chunk, in every level's
// vertex array: empty (a crashed writer, a delete that keeps folders),
// holding only empty folders, holding data without its zarr.json, and a
// shard folder without one.
var strayFolders = []string{"97.98.99/", "96.98.99/c/", "__shard_999999/"}

const strayData = "95.98.99/c/0"

// TestEmptyChunkFolders: folders that hold no chunk — and, on object
// stores, "folder/" markers — are not chunks, as the reference reader
// takes them (a chunk is a child array: a folder with a zarr.json): the
// chunk keys, the whole-store box and the level ChooseLevel picks (what
// level=auto answers from) are the same as without them, on local
// folders and object stores, unpacked and __shard_-packed. Before, the
// whole box and level=auto failed with "no such cell", and a stray shard
// folder kept the store from opening.
func TestEmptyChunkFolders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, name := range []string{"graph", "points_pyramid", "graph_sharded"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want, _ := ref07.open(t, name)
			dir := copyFixture(t, name)
			mem := zvftest.Store(t, "mem://")
			zvftest.Upload(t, mem, dir)
			for _, n := range want.Levels() {
				v := filepath.Join(dir, strconv.Itoa(n), "vertices")
				for _, f := range strayFolders {
					if err := os.MkdirAll(filepath.Join(v, f), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := mem.Put(ctx, fmt.Sprintf("%d/vertices/%s", n, f), nil); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.MkdirAll(filepath.Dir(filepath.Join(v, strayData)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(v, strayData), []byte{1, 2, 3}, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := mem.Put(ctx, fmt.Sprintf("%d/vertices/%s", n, strayData), []byte{1, 2, 3}); err != nil {
					t.Fatal(err)
				}
			}
			// Level folders without a zarr.json: no levels either (taken
			// for one, an empty coarsest level was what level=auto
			// answered from).
			addStrayLevels(t, dir, mem)
			local, err := localfs.Open(dir, localfs.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = local.Close() })
			for backend, st := range map[string]storage.Store{"local": local, "mem": mem} {
				s, err := zvf.Open(ctx, st, zvf.Options{Name: name, Cache: cache.New(64 << 20)})
				if err != nil {
					t.Fatalf("%s: open: %v", backend, err)
				}
				sameAsFixture(t, backend, want, s)
			}
		})
	}
}

var strayLevels = []string{"7/", "8/vertices/9.9.9/"}

// addStrayLevels makes the strayLevels folders in dir and their keys,
// without data, in mem.
func addStrayLevels(t *testing.T, dir string, mem storage.Writer) {
	t.Helper()
	for _, f := range strayLevels {
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := mem.Put(context.Background(), f, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// sameAsFixture compares every level's chunk keys and whole-store box,
// and the level ChooseLevel picks for the whole store at a few budgets.
func sameAsFixture(t *testing.T, backend string, want, got *zvf.Store) {
	t.Helper()
	ctx := context.Background()
	if fmt.Sprint(want.Levels()) != fmt.Sprint(got.Levels()) {
		t.Fatalf("%s: levels %v, want %v", backend, got.Levels(), want.Levels())
	}
	for _, n := range want.Levels() {
		a, _ := want.Level(n)
		b, err := got.Level(n)
		if err != nil {
			t.Fatalf("%s: level %d: %v", backend, n, err)
		}
		if fmt.Sprint(a.Keys()) != fmt.Sprint(b.Keys()) {
			t.Fatalf("%s: level %d keys\n%v\nwant\n%v", backend, n, b.Keys(), a.Keys())
		}
		x := bbox(t, a, everywhere.min, everywhere.max, []string{"*"}, true)
		y := bbox(t, b, everywhere.min, everywhere.max, []string{"*"}, true)
		if fmt.Sprint(x) != fmt.Sprint(y) {
			t.Fatalf("%s: level %d: the whole-store box differs: %d rows, want %d", backend, n, len(y.rows), len(x.rows))
		}
	}
	for _, budget := range []int64{1, 100, 1 << 30} {
		a, err := want.ChooseLevel(ctx, everywhere.min, everywhere.max, budget, nil, zvf.Selection{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := got.ChooseLevel(ctx, everywhere.min, everywhere.max, budget, nil, zvf.Selection{})
		if err != nil || a != b {
			t.Fatalf("%s: ChooseLevel(budget %d) = %d, %v; want %d", backend, budget, b, err, a)
		}
	}
}

// TestEmptyCellFolders09: in a ZVF 0.9 store whose cells are found by
// listing (no nonempty_chunks), empty folders and "folder/" markers
// under an array's c/ are no cells either.
func TestEmptyCellFolders09(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, name := range []string{"graph", "points_pyramid"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			mem := to09(t, name, zvftest.To09Options{OmitNonempty: true}).(storage.Writer)
			want, err := zvf.Open(ctx, mem, zvf.Options{Name: name, Cache: cache.New(64 << 20)})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			local, err := localfs.Open(dir, localfs.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = local.Close() })
			if err := mem.Walk(ctx, "", func(k string, _ storage.Attrs) error {
				b, err := storage.ReadAll(ctx, mem, k, 1<<30)
				if err != nil {
					return err
				}
				return local.Put(ctx, k, b)
			}); err != nil {
				t.Fatal(err)
			}
			addStrayLevels(t, dir, mem)
			for _, n := range want.Levels() {
				for _, f := range []string{"c/97/", "c/96/98/", "c/95/98/99/"} {
					k := fmt.Sprintf("%d/vertices/%s", n, f)
					if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(k)), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := mem.Put(ctx, k, nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			for backend, st := range map[string]storage.Store{"local": local, "mem": mem} {
				s, err := zvf.Open(ctx, st, zvf.Options{Name: name, Cache: cache.New(64 << 20)})
				if err != nil {
					t.Fatalf("%s: open: %v", backend, err)
				}
				sameAsFixture(t, backend, want, s)
			}
		})
	}
}

// TestChecksEndDespiteLinkLoops: a whole-store check (what a reopen and
// --revalidate-walk run) of a store holding "x -> ." links ends, and finds
// nothing changed. Before, it walked ~2^40 paths while holding the
// handle's lock, so no later check of the store ran either.
func TestChecksEndDespiteLinkLoops(t *testing.T) {
	t.Parallel()
	dir := copyFixture(t, "graph")
	for _, l := range []string{"x", "y", "0/vertices/back"} {
		target := "."
		if l == "0/vertices/back" {
			target = "../.."
		}
		if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(l))); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := localfs.Open(dir, localfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	h, err := zvf.OpenHandle(ctx, st, zvf.Options{Name: "graph"}, zvf.Watch{Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Current(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if changed, err := h.RefreshDeep(ctx); changed || err != nil {
			t.Fatalf("RefreshDeep of an unchanged store: changed=%v, %v", changed, err)
		}
	}
	if _, err := zvf.Fingerprint(ctx, st); err != nil {
		t.Fatal(err)
	}
}

// TestEmptyFamilyFolders09: in a ZVF 0.9 store an offsets segment, a
// vertex attribute and an object attribute are arrays, so a folder
// without a zarr.json where one would be (left by a crashed writer or a
// delete that keeps folders, or a "folder/" marker) is none of them, as the
// reference reader takes it: the store opens, lists the attributes it
// has, and answers as without the folder. Before, a stray links/0/<offsets>
// folder kept the store from opening, and a stray attribute folder was
// listed as a float32 attribute with no values.
func TestEmptyFamilyFolders09(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stray := []string{"links/0/0.0.+2/", "links/0/+1.+1.+1/c/0/", "vertex_attributes/stray/", "object_attributes/stray/c/"}
	for _, name := range []string{"graph_v09", "points_pyramid_v09"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src := filepath.Join(fixtures09, name+".zarrvectors")
			want, err := zvf.Open(ctx, zvftest.Store(t, src), zvf.Options{Name: name, Cache: cache.New(64 << 20)})
			if err != nil {
				t.Fatal(err)
			}
			dir := zvftest.CopyTree(t, src)
			mem := memFixture09(t, name)
			for _, n := range want.Levels() {
				for _, f := range stray {
					k := fmt.Sprintf("%d/%s", n, f)
					if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(k)), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := mem.Put(ctx, k, nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			for backend, st := range map[string]storage.Store{"local": zvftest.Store(t, dir), "mem": mem} {
				s, err := zvf.Open(ctx, st, zvf.Options{Name: name, Cache: cache.New(64 << 20)})
				if err != nil {
					t.Fatalf("%s: open: %v", backend, err)
				}
				for _, n := range want.Levels() {
					a, _ := want.Level(n)
					b, _ := s.Level(n)
					if fmt.Sprint(*a.Info()) != fmt.Sprint(*b.Info()) {
						t.Fatalf("%s: level %d info\n%+v\nwant\n%+v", backend, n, *b.Info(), *a.Info())
					}
				}
				sameAsFixture(t, backend, want, s)
			}
		})
	}
}

// TestEmptyCellsFoundByListing09: an unwritten cell and an empty one are
// one (zvf-0.9-format §3.2), so where cells are found by listing (no
// nonempty_chunks) a stored empty cell is as absent as one not stored: a
// chunk whose vertices, fragment index, attribute and link cells were all
// written empty is no chunk and breaks nothing. Before, its empty
// fragment index was corrupt, and every whole-level box failed with it.
func TestEmptyCellsFoundByListing09(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const name = "graph_v09"
	families := []string{"vertices", "vertex_fragments", "vertex_attributes/radius", "links/0/0.0.0", "links/0/0.0.+1"}
	st := memFixture09(t, name)
	for _, f := range families {
		editMemJSON(t, st, "0/"+f+"/zarr.json", func(doc map[string]any) { delete(doc["attributes"].(map[string]any), "nonempty_chunks") })
	}
	want := zvftest.OpenLevel(t, st, zvf.Options{Name: name, Cache: cache.New(64 << 20)}, 0)
	for _, f := range families {
		if err := st.Put(ctx, "0/"+f+"/c/0/0/0", withCell(nil)); err != nil {
			t.Fatal(err)
		}
	}
	got := zvftest.OpenLevel(t, st, zvf.Options{Name: name, Cache: cache.New(64 << 20)}, 0)
	x := bbox(t, want, everywhere.min, everywhere.max, []string{"*"}, true)
	y := bbox(t, got, everywhere.min, everywhere.max, []string{"*"}, true)
	if fmt.Sprint(x) != fmt.Sprint(y) {
		t.Fatalf("the whole-level box differs: %d rows, %d edges; want %d, %d", len(y.rows), len(y.edges), len(x.rows), len(x.edges))
	}
	// Not a chunk of no rows either, as one never written is not
	// (TestEmptyVerticesCellIsNoChunk09).
	if tile, err := got.Chunk(ctx, zvf.Key{0, 0, 0}, []string{"*"}); !errors.Is(err, zvf.ErrNotFound) || fmt.Sprint(got.Keys()) != fmt.Sprint(want.Keys()) {
		t.Fatalf("chunk 0.0.0: %+v, %v; chunks %v; want not found, and the chunks %v", tile, err, got.Keys(), want.Keys())
	}
	if rep := zvf.Validate(ctx, st, name, 5, nil); !rep.OK() {
		t.Fatalf("validate: %+v", rep.Problems)
	}
}
