package zvf_test

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zarr"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestGroupRangesAreBoundedByTheChunkLimit: a ZVF 0.9 range group's
// members ([start, stop) in group_ranges) are not backed by bytes, so the
// most that one level materializes is bounded like any decoded chunk
// (zarr Limits.MaxChunkBytes, 8 bytes a member), not by num_objects alone,
// which is the same metadata's word: a 4 KB store declaring 2^27 objects
// and the range [0, 2^27) made the server allocate 1 GiB (outside the
// cache's accounting) to answer for an empty group beside it, and 2^31
// would have been 16 GiB. Here the limit is 1 MiB and the range 2^20
// members (8 MiB).
func TestGroupRangesAreBoundedByTheChunkLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := zvftest.CopyTree(t, filepath.Join(fixtures09, "points_pyramid_v09.zarrvectors"))
	const n = 1 << 20
	rewrite := func(file string, f func(doc map[string]any)) {
		editJSON(t, filepath.Join(dir, filepath.FromSlash(file)), f)
	}
	// Two groups, both empty elements (uncompressed), group 0 the range.
	rewrite("0/groups/zarr.json", func(doc map[string]any) {
		doc["codecs"] = []any{map[string]any{"name": "vlen-bytes", "configuration": map[string]any{}}}
		doc["attributes"].(map[string]any)["group_ranges"] = map[string]any{"0": []int{0, n}}
	})
	cell := binary.LittleEndian.AppendUint32(nil, 2)
	cell = binary.LittleEndian.AppendUint32(cell, 0)
	cell = binary.LittleEndian.AppendUint32(cell, 0)
	if err := os.WriteFile(filepath.Join(dir, "0", "groups", "c", "0"), cell, 0o644); err != nil {
		t.Fatal(err)
	}
	rewrite("0/object_index/zarr.json", func(doc map[string]any) {
		doc["attributes"].(map[string]any)["num_objects"] = n
	})
	codecs := zarr.NewCodecs(zarr.Limits{MaxChunkBytes: 1 << 20})
	st, err := zvf.Open(ctx, zvftest.Store(t, dir), zvf.Options{Name: "g", Codecs: codecs})
	if err != nil {
		t.Fatal(err)
	}
	l, err := st.Level(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{1, 0} {
		ids, err := l.Group(ctx, id)
		if !errors.Is(err, zvf.ErrCorrupt) && !errors.Is(err, zvf.ErrUnsupported) {
			t.Errorf("group %d: %d members, err %v; want the level's groups refused", id, len(ids), err)
		}
	}
}
