package zarr_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zarr"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestShardedVlen: a sharding_indexed array of variable_length_bytes
// (a ZVF 0.9 chunk-grid array, 4×4×4 one-element cells a shard) reads the
// same element whether the whole shard is decoded or only its inner chunk
// is fetched by range; the expected bytes are the fixture's own
// raw_cell_examples (0/vertices cell 1.1.1).
func TestShardedVlen(t *testing.T) {
	ctx := context.Background()
	st := zvftest.Store(t, filepath.Join("../../testdata/zvf-0.9/mesh_sharded_v09.zarrvectors"))
	a, err := zarr.OpenArray(ctx, st, "0/vertices", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := fixtureCell(t, "mesh_sharded_v09", "0/vertices", []int64{1, 1, 1})
	whole, err := a.ReadChunk(ctx, []int64{0, 0, 0})
	if err != nil {
		t.Fatal(err)
	}
	if len(whole.Elems) != 64 {
		t.Fatalf("shard decoded to %d elements, want 64", len(whole.Elems))
	}
	if got := hex.EncodeToString(whole.Elems[1*16+1*4+1]); got != want {
		t.Fatalf("element (1,1,1) of the shard = %s, want %s", got, want)
	}
	if len(whole.Elems[0]) != 0 {
		t.Fatalf("element (0,0,0) is absent from the shard and should read as the fill value, got %d bytes", len(whole.Elems[0]))
	}
	inner, err := a.ReadInnerChunk(ctx, []int64{0, 0, 0}, []int64{1, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(inner.Elems) != 1 || hex.EncodeToString(inner.Elems[0]) != want {
		t.Fatalf("inner chunk (1,1,1) read by range = %d elements", len(inner.Elems))
	}
	missing, err := a.ReadInnerChunk(ctx, []int64{0, 0, 0}, []int64{0, 0, 0})
	if err != nil || len(missing.Elems) != 1 || len(missing.Elems[0]) != 0 {
		t.Fatalf("absent inner chunk: %v %v", missing, err)
	}
	// The index is read once and reused for several inner chunks.
	ix, err := a.ReadShardIndex(ctx, []int64{0, 0, 0})
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.ReadInner(ctx, ix, []int64{1, 1, 1})
	if err != nil || hex.EncodeToString(c.Elems[0]) != want {
		t.Fatalf("inner chunk through a kept index: %v", err)
	}
	if !ix.Present([]int64{1, 1, 1}) || ix.Present([]int64{0, 0, 0}) {
		t.Fatalf("index presence wrong")
	}
}

// fixtureCell is the payload (hex) the fixture's expected answers give for
// one cell of array (raw_cell_examples).
func fixtureCell(t *testing.T, store, array string, chunk []int64) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../testdata/zvf-0.9", store+".expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Levels []struct {
			Raw []struct {
				Array   string  `json:"array"`
				Chunk   []int64 `json:"chunk"`
				Payload string  `json:"payload_hex"`
			} `json:"raw_cell_examples"`
		} `json:"levels"`
	}
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	for _, l := range e.Levels {
		for _, r := range l.Raw {
			if r.Array == array && fmt.Sprint(r.Chunk) == fmt.Sprint(chunk) {
				return r.Payload
			}
		}
	}
	t.Fatalf("%s has no raw cell example for %s %v", store, array, chunk)
	return ""
}
