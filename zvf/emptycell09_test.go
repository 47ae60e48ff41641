package zvf_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
)

// withEmptyInner returns shard (a sharding_indexed chunk of n inner
// chunks, index at its end with a crc32c) with inner chunk i stored as a
// vlen frame holding one empty cell.
func withEmptyInner(t *testing.T, shard []byte, n, i int) []byte {
	t.Helper()
	size := 16*n + 4
	data, index := shard[:len(shard)-size], slices.Clone(shard[len(shard)-size:len(shard)-4])
	if binary.LittleEndian.Uint64(index[16*i:]) != ^uint64(0) {
		t.Fatalf("inner chunk %d is stored already", i)
	}
	binary.LittleEndian.PutUint64(index[16*i:], uint64(len(data)))
	binary.LittleEndian.PutUint64(index[16*i+8:], 8)
	out := append(slices.Clone(data), withCell(nil)...)
	out = append(out, index...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(index, crc32.MakeTable(crc32.Castagnoli)))
}

// TestEmptyVerticesCellIsNoChunk09: without nonempty_chunks a reader
// finds a 0.9 level's chunks by listing its vertices cells, and a cell
// written empty is one never written (zvf-0.9-format §3.2: the reference's
// derive_nonempty_chunks drops empty cells). Such a cell is no chunk: not
// in the level's chunk list or count, and reading it is not-found. Before,
// it was a chunk of 0 rows, listed by /levels/{l}/chunks and counted.
func TestEmptyVerticesCellIsNoChunk09(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		store string
		empty func(t *testing.T, st storage.Writer)
	}{
		{"graph_v09", func(t *testing.T, st storage.Writer) {
			if err := st.Put(ctx, "0/vertices/c/0/0/0", withCell(nil)); err != nil {
				t.Fatal(err)
			}
		}},
		{"mesh_sharded_v09", func(t *testing.T, st storage.Writer) {
			shard, err := storage.ReadAll(ctx, st, "0/vertices/c/0/0/0", 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Put(ctx, "0/vertices/c/0/0/0", withEmptyInner(t, shard, 64, 0)); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.store, func(t *testing.T) {
			t.Parallel()
			st := memFixture09(t, tc.store)
			s, err := zvf.Open(ctx, st, zvf.Options{Name: tc.store})
			if err != nil {
				t.Fatal(err)
			}
			l, _ := s.Level(0)
			want := fmt.Sprint(l.Keys())
			editMemJSON(t, st, "0/vertices/zarr.json", func(doc map[string]any) {
				delete(doc["attributes"].(map[string]any), "nonempty_chunks")
			})
			tc.empty(t, st)
			if s, err = zvf.Open(ctx, st, zvf.Options{Name: tc.store, Cache: cache.New(64 << 20)}); err != nil {
				t.Fatal(err)
			}
			l, _ = s.Level(0)
			if got := fmt.Sprint(l.Keys()); got != want || l.Info().ChunkCount != len(l.Keys()) {
				t.Fatalf("chunks (%d counted)\n%s\nwant\n%s", l.Info().ChunkCount, got, want)
			}
			if _, err := l.Chunk(ctx, zvf.Key{0, 0, 0}, nil); !errors.Is(err, zvf.ErrNotFound) {
				t.Fatalf("chunk 0.0.0: %v, want not found", err)
			}
		})
	}
}
