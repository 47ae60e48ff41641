package zvftest

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// WriteObjectIDs turns level 0 of the ZVF 0.9 store in the folder dir into
// an object index by id (vlen_manifests_v2): object_index/object_ids names
// the object of each manifest row, ids[row].
func WriteObjectIDs(tb testing.TB, dir string, ids []int64) {
	tb.Helper()
	if err := WriteObjectIDsTo(dir, ids); err != nil {
		tb.Fatal(err)
	}
}

// WriteObjectIDsTo is WriteObjectIDs for a caller with no test at hand.
func WriteObjectIDsTo(dir string, ids []int64) error {
	meta := fmt.Sprintf(`{"zarr_format":3,"node_type":"array","shape":[%d],"data_type":"int64",`+
		`"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[%d]}},`+
		`"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},"fill_value":-1,`+
		`"codecs":[{"name":"bytes","configuration":{"endian":"little"}}],"attributes":{"zv_array":"object_ids"}}`, len(ids), len(ids))
	var data []byte
	for _, id := range ids {
		data = binary.LittleEndian.AppendUint64(data, uint64(id))
	}
	p := filepath.Join(dir, "0/object_index/object_ids")
	for name, b := range map[string][]byte{"zarr.json": []byte(meta), "c/0": data} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(p, name)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(p, name), b, 0o644); err != nil {
			return err
		}
	}
	index := filepath.Join(dir, "0/object_index/zarr.json")
	b, err := os.ReadFile(index)
	if err != nil {
		return err
	}
	v2 := strings.Replace(string(b), `"vlen_manifests_v1"`, `"vlen_manifests_v2"`, 1)
	if v2 == string(b) {
		return fmt.Errorf("%s names no vlen_manifests_v1 layout", index)
	}
	return os.WriteFile(index, []byte(v2), 0o644)
}
