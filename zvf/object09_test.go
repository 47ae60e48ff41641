package zvf_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

// TestObjectIndexV2: with vlen_manifests_v2 an object is found by its id
// in object_index/object_ids, not by its manifest row — its vertices,
// manifest and object attributes are those of its row, a bbox names each
// vertex's object by id, and a row number that is no id is not found —
// whether the ids ascend (binary search) or not (a map), and after a
// cancelled first request; a malformed object_ids is a typed error naming
// the array.
func TestObjectIndexV2(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const name = "points_pyramid_v09"
	orig, _ := ref09.open(t, name)
	l1, _ := orig.Level(0)
	all := zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}}
	want := bbox(t, l1, all.Min, all.Max, nil, false)
	for _, tc := range []struct {
		name string
		ids  []int64
	}{
		{"ascending", []int64{3, 10, 11, 500, 1 << 40, 1<<40 + 1}},
		{"unordered", []int64{1000, 7, 3000, 42, 5, 99}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := withObjectIDs(t, name, tc.ids)
			if got := l.Info().ObjectIndexLayout; got != "vlen_manifests_v2" {
				t.Fatalf("object_index_layout %q", got)
			}
			// A request cancelled while object_ids loads leaves nothing
			// behind: the next one reads it.
			cancelled, cancel := context.WithCancel(ctx)
			cancel()
			if _, err := l.Object(cancelled, tc.ids[0], nil); err == nil {
				t.Fatal("a cancelled request found an object")
			}
			for row, id := range tc.ids {
				a := zvftest.Object(t, l1, int64(row), []string{"*"})
				b, err := l.Object(ctx, id, []string{"*"})
				if err != nil {
					t.Fatalf("object %d (row %d): %v", id, row, err)
				}
				if fmt.Sprint(a.Vertices.Data, a.FragmentCounts, a.ObjectAttributes) != fmt.Sprint(b.Vertices.Data, b.FragmentCounts, b.ObjectAttributes) {
					t.Fatalf("object %d is not row %d's object", id, row)
				}
				oa, err := l.ObjectAttributes(ctx, id)
				if err != nil || fmt.Sprint(oa) != fmt.Sprint(a.ObjectAttributes) {
					t.Fatalf("object attributes of %d: %v, want row %d's", id, err, row)
				}
				ma, _ := l1.Manifest(ctx, int64(row))
				mb, err := l.Manifest(ctx, id)
				if err != nil || fmt.Sprint(ma.Blocks) != fmt.Sprint(mb.Blocks) {
					t.Fatalf("manifest of %d: %v", id, err)
				}
			}
			for _, missing := range []int64{1, 2, 4, 6} {
				if _, err := l.Object(ctx, missing, nil); !errors.Is(err, zvf.ErrNotFound) {
					t.Errorf("object %d (a row number, no id): %v", missing, err)
				}
				if _, err := l.ObjectAttributes(ctx, missing); !errors.Is(err, zvf.ErrNotFound) {
					t.Errorf("object attributes of %d (a row number, no id): %v", missing, err)
				}
			}
			got := bbox(t, l, all.Min, all.Max, nil, false)
			if len(got.ids) != len(want.ids) {
				t.Fatalf("%d object ids, want %d", len(got.ids), len(want.ids))
			}
			for i, row := range want.ids {
				wantID := int64(-1)
				if row >= 0 {
					wantID = tc.ids[row]
				}
				if got.ids[i] != wantID {
					t.Fatalf("vertex %d: object %d, want %d (row %d)", i, got.ids[i], wantID, row)
				}
			}
		})
	}
	for _, tc := range []struct {
		name string
		ids  []int64
		msg  string
	}{
		{"duplicate id", []int64{1, 2, 3, 2, 5, 6}, "object id 2 at rows 1 and 3"},
		{"too few ids", []int64{1, 2, 3}, "needs 6 integer object ids"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := withObjectIDs(t, name, tc.ids)
			_, err := l.Object(ctx, 5, nil)
			var ze *zvf.Error
			if !errors.As(err, &ze) || !errors.Is(err, zvf.ErrCorrupt) || ze.Array != "object_index/object_ids" || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want a corrupt-data error on object_index/object_ids saying %q", err, tc.msg)
			}
		})
	}
}

// withObjectIDs is level 0 of a copy of 0.9 fixture name whose objects
// have ids (object_index/object_ids).
func withObjectIDs(t *testing.T, name string, ids []int64) *zvf.Level {
	t.Helper()
	dir := zvftest.CopyTree(t, filepath.Join(fixtures09, name+".zarrvectors"))
	zvftest.WriteObjectIDs(t, dir, ids)
	return zvftest.OpenLevel(t, zvftest.Store(t, dir), zvf.Options{Name: name, Cache: cache.New(64 << 20)}, 0)
}

// TestObjectIDsSizeNothing: object_ids is read whole and each id widened
// to int64, so what it declares must be backed by stored chunks before
// anything is sized by it. 2^22 uint8 ids with no chunk stored (every row
// the fill value) are corrupt, found without allocating for them; before,
// 4 MiB of fill, 32 MiB of ids and a map of 2^22 entries were allocated
// to find the first two rows equal (at 2^30 ids: 9 GiB and more).
func TestObjectIDsSizeNothing(t *testing.T) {
	alloctest.SkipUnderRace(t)
	ctx := context.Background()
	const name, n = "points_pyramid_v09", 1 << 22
	dir := zvftest.CopyTree(t, filepath.Join(fixtures09, name+".zarrvectors"))
	zvftest.WriteObjectIDs(t, dir, make([]int64, 6))
	meta := fmt.Sprintf(`{"zarr_format":3,"node_type":"array","shape":[%d],"data_type":"uint8",`+
		`"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[%d]}},`+
		`"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},"fill_value":0,`+
		`"codecs":[{"name":"bytes","configuration":{}}],"attributes":{}}`, n, n)
	for file, b := range map[string]string{"0/object_index/object_ids/zarr.json": meta} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(dir, "0/object_index/object_ids/c/0")); err != nil {
		t.Fatal(err)
	}
	editJSON(t, filepath.Join(dir, "0/object_index/zarr.json"), func(m map[string]any) {
		m["attributes"].(map[string]any)["num_objects"] = n
	})
	l := zvftest.OpenLevel(t, zvftest.Store(t, dir), zvf.Options{Name: name, Cache: cache.New(64 << 20)}, 0)
	var err error
	got := alloctest.Bytes(func() { _, err = l.Object(ctx, 3, nil) })
	var ze *zvf.Error
	if !errors.As(err, &ze) || !errors.Is(err, zvf.ErrCorrupt) || ze.Array != "object_index/object_ids" {
		t.Fatalf("err = %v, want a corrupt-data error on object_index/object_ids", err)
	}
	if got > 4<<20 {
		t.Fatalf("%d MiB allocated for ids no chunk holds", got>>20)
	}
}
