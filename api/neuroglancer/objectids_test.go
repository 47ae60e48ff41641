package neuroglancer_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestObjectsByID09: on a ZVF 0.9.2 store whose object index names
// objects by id (object_index/object_ids), the segment list, skeletons
// and line annotations use those ids — not manifest row numbers, which
// are then no object at all.
func TestObjectsByID09(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		fixture string
		objects int
		route   string // the object's route, without its id
		// geometry is how many leading bytes of an answer are geometry
		// (the rest may name the object's id).
		geometry func(b []byte) int
	}{
		{"skeleton_v09", 5, "/ng/s/skeletons/", func(b []byte) int { return len(b) }},
		// A polyline record: its vertex count, then rank × count float32s.
		{"streamlines_v09", 40, "/ng/s/annotations/by_id/", func(b []byte) int { return 4 + 12*int(binary.LittleEndian.Uint32(b)) }},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			dir := zvftest.CopyTree(t, filepath.Join("../../testdata/zvf-0.9", tc.fixture+".zarrvectors"))
			ids := make([]int64, tc.objects)
			for row := range ids {
				ids[row] = 5000 - 3*int64(row) // descending: no row is its own id
			}
			zvftest.WriteObjectIDs(t, dir, ids)
			s := apitest.Open(t, dir, "s", cache.New(64<<20))
			o := apitest.Open(t, filepath.Join("../../testdata/zvf-0.9", tc.fixture+".zarrvectors"), "o", cache.New(64<<20))
			_, ts := newServer(t, api.Options{Stores: []*zvf.Store{s, o}})
			if tc.fixture == "skeleton_v09" {
				var props struct {
					Inline struct{ IDs []string } `json:"inline"`
				}
				if err := json.Unmarshal(apitest.MustGet(t, ts, "/ng/s/skeletons/seg_props/info"), &props); err != nil {
					t.Fatal(err)
				}
				var want []string
				for _, id := range ids {
					want = append(want, strconv.FormatInt(id, 10))
				}
				got := slices.Clone(props.Inline.IDs)
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Fatalf("segment ids %v, want %v", props.Inline.IDs, want)
				}
			}
			// Object id of manifest row r is the original store's object r:
			// the same geometry, vertex by vertex.
			for row, id := range ids {
				resp, b := apitest.Get(t, ts, tc.route+strconv.FormatInt(id, 10))
				want := apitest.MustGet(t, ts, strings.Replace(tc.route, "/s/", "/o/", 1)+strconv.Itoa(row))
				if resp.StatusCode != 200 || len(b) != len(want) {
					t.Fatalf("object %d (row %d): %d, %d bytes, want the %d of the original's object %d", id, row, resp.StatusCode, len(b), len(want), row)
				}
				if n := tc.geometry(want); !bytes.Equal(b[:n], want[:n]) {
					t.Fatalf("object %d (row %d): its first %d bytes differ from the original's object %d", id, row, n, row)
				}
			}
			if resp, b := apitest.Get(t, ts, tc.route+"1"); resp.StatusCode != 404 {
				t.Fatalf("row 1, which is no id: %d %.200s", resp.StatusCode, b)
			}
		})
	}
}
