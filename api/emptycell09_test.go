package api_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestEmptyVerticesCellIsNoChunk09: a ZVF 0.9 level without
// nonempty_chunks, whose vertices cell 0.0.0 is written empty (a vlen frame
// of one empty cell): the chunk list, the descriptor's chunk_count and the
// chunk's own route answer as for a chunk never written. Before, 0.0.0 was
// listed and counted, and its route answered an empty tile.
func TestEmptyVerticesCellIsNoChunk09(t *testing.T) {
	t.Parallel()
	dir := graph09Edited(t, func(meta []byte) []byte {
		return regexp.MustCompile(`"nonempty_chunks":\s*\[[^\]]*\],?`).ReplaceAll(meta, nil)
	})
	empty := filepath.Join(dir, "0", "vertices", "c", "0", "0", "0")
	if err := os.MkdirAll(filepath.Dir(empty), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, []byte{1, 0, 0, 0, 0, 0, 0, 0}, 0o644); err != nil {
		t.Fatal(err)
	}
	s := apitest.Open(t, dir, "g", cache.New(16<<20))
	h := apitest.New(t, api.Options{Stores: []*zvf.Store{s}}).Handler()
	var list struct{ Chunks []string }
	if code, _, body := serve(t, h, "/api/v1/stores/g/levels/0/chunks"); code != 200 || json.Unmarshal(body, &list) != nil ||
		len(list.Chunks) != 36 || slices.Contains(list.Chunks, "0.0.0") {
		t.Fatalf("chunk list: %d %s; want the 36 chunks holding vertices", code, body)
	}
	var desc struct {
		Levels []struct {
			ChunkCount int `json:"chunk_count"`
		}
	}
	if code, _, body := serve(t, h, "/api/v1/stores/g"); code != 200 || json.Unmarshal(body, &desc) != nil || len(desc.Levels) == 0 || desc.Levels[0].ChunkCount != 36 {
		t.Fatalf("descriptor: %d %.300s; want chunk_count 36 at level 0", code, body)
	}
	if code, _, body := serve(t, h, "/api/v1/stores/g/levels/0/chunks/0.0.0"); code != 404 {
		t.Fatalf("chunk 0.0.0: %d %s; want 404, as for a chunk never written", code, body)
	}
}

// graph09Edited copies the 0.9 graph fixture and rewrites its level 0
// vertices zarr.json with edit, failing when edit changes nothing (the
// fixture no longer has what the test removes).
func graph09Edited(t *testing.T, edit func(meta []byte) []byte) string {
	t.Helper()
	dir := zvftest.CopyTree(t, filepath.Join(fixtures09, "graph_v09.zarrvectors"))
	meta := filepath.Join(dir, "0", "vertices", "zarr.json")
	b, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	edited := edit(b)
	if string(edited) == string(b) {
		t.Fatal("the edit changed nothing in 0/vertices/zarr.json")
	}
	if err := os.WriteFile(meta, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
