package zarr

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// Sharded reports whether the array's chunks are shards whose inner chunks
// can be read one by one (ReadInnerChunk).
func (a *Array) Sharded() bool {
	_, ok := a.pipe.ab.(*shardingCodec)
	return ok && len(a.pipe.aa) == 0 && len(a.pipe.bb) == 0
}

// InnerChunkShape is the shape of a shard's inner chunks.
func (a *Array) InnerChunkShape() []int64 {
	if s, ok := a.pipe.ab.(*shardingCodec); ok {
		return s.inner
	}
	return a.meta.ChunkShape
}

// ReadInnerChunk reads one inner chunk of a shard with two range reads —
// the shard index, then that chunk's bytes — instead of the whole shard.
// A missing shard or inner chunk is the fill value.
func (a *Array) ReadInnerChunk(ctx context.Context, shard, inner []int64) (*Chunk, error) {
	ix, err := a.ReadShardIndex(ctx, shard)
	if err != nil {
		return nil, err
	}
	return a.ReadInner(ctx, ix, inner)
}

// ShardIndex is one shard's decoded index, kept by callers that read
// several inner chunks of a shard: each then costs one range read. Reads
// through it are pinned to the version of the shard the index came from.
type ShardIndex struct {
	key  string
	etag string
	grid []int64 // inner chunks per shard along each axis
	// size is the length of the shard before an index at its end (-1 when
	// not known: the index is at the start).
	size    int64
	entries []byte // (offset, nbytes) uint64 pairs, C order; nil: the shard is missing
}

// SizeBytes is what the index holds in memory (for caches).
func (ix *ShardIndex) SizeBytes() int64 {
	return int64(len(ix.entries)+len(ix.key)+len(ix.etag)) + 8*int64(len(ix.grid)) + 96
}

// flat is the C-order index of inner chunk coords, or false when they lie
// outside the shard.
func (ix *ShardIndex) flat(inner []int64) (int64, bool) {
	if len(inner) != len(ix.grid) {
		return 0, false
	}
	var i int64
	for d, c := range inner {
		if c < 0 || c >= ix.grid[d] {
			return 0, false
		}
		i = i*ix.grid[d] + c
	}
	return i, true
}

// entry returns the (offset, nbytes) of inner chunk i, and whether it is
// stored (both all ones: absent).
func (ix *ShardIndex) entry(i int64) (off, n uint64, ok bool) {
	if ix.entries == nil {
		return 0, 0, false
	}
	off = binary.LittleEndian.Uint64(ix.entries[16*i:])
	n = binary.LittleEndian.Uint64(ix.entries[16*i+8:])
	return off, n, !(off == ^uint64(0) && n == ^uint64(0))
}

// Present reports whether the shard stores inner chunk inner; an absent
// one reads as the fill value, as do coordinates outside the shard.
func (ix *ShardIndex) Present(inner []int64) bool {
	i, ok := ix.flat(inner)
	if !ok {
		return false
	}
	_, _, ok = ix.entry(i)
	return ok
}

// StoredBytes is the size of inner chunk inner as the shard stores it
// (encoded), and whether it is stored.
func (ix *ShardIndex) StoredBytes(inner []int64) (int64, bool) {
	i, ok := ix.flat(inner)
	if !ok {
		return 0, false
	}
	_, n, ok := ix.entry(i)
	if !ok || n > 1<<62 {
		return 0, false
	}
	return int64(n), true
}

func (a *Array) shardFail(key string, err error) error {
	var ze *Error
	if errors.As(err, &ze) {
		ze.Path, ze.Chunk = a.path, key
		return ze
	}
	return &Error{Path: a.path, Chunk: key, Codec: "sharding_indexed", Err: err}
}

// ReadShardIndex reads and decodes the index of the shard at coords: one
// range read (and a Stat first when the index is at the end). A missing
// shard has an index that stores nothing.
func (a *Array) ReadShardIndex(ctx context.Context, shard []int64) (*ShardIndex, error) {
	s, ok := a.pipe.ab.(*shardingCodec)
	if !ok || !a.Sharded() {
		return nil, &Error{Path: a.path, Err: fmt.Errorf("array is not sharded")}
	}
	if err := a.checkCoords(shard); err != nil {
		return nil, &Error{Path: a.path, Err: err}
	}
	key := a.ChunkKey(shard)
	ix := &ShardIndex{key: key, grid: s.grid, size: -1}
	// The index and the inner chunks are read as one version of the shard:
	// later reads are pinned to the first's (If-Match on S3).
	var off int64
	pin := ""
	if !s.atStart {
		at, err := a.st.Stat(ctx, key)
		if errors.Is(err, storage.ErrNotFound) {
			return ix, nil
		}
		if err != nil {
			return nil, a.shardFail(key, err)
		}
		if at.Size < s.indexLen {
			return nil, a.shardFail(key, corrupt("shard of %d bytes cannot hold its %d-byte index", at.Size, s.indexLen))
		}
		off = at.Size - s.indexLen
		pin = at.ETag
		ix.size = off
	}
	ro := storage.Range(off, s.indexLen)
	ro.IfMatch = pin
	idxObj, err := a.st.Get(ctx, key, ro)
	if errors.Is(err, storage.ErrNotFound) {
		return ix, nil
	}
	if err != nil {
		return nil, a.shardFail(key, err)
	}
	raw := idxObj.Data
	if int64(len(raw)) != s.indexLen {
		return nil, a.shardFail(key, corrupt("shard index read %d bytes, want %d", len(raw), s.indexLen))
	}
	ic, err := s.indexPipe.decode(raw)
	if err != nil {
		return nil, a.shardFail(key, err)
	}
	ix.etag = idxObj.Attrs.ETag
	ix.entries = ic.Data
	return ix, nil
}

// ReadInner reads inner chunk inner of the shard ix indexes with one range
// read; an absent inner chunk is the fill value.
func (a *Array) ReadInner(ctx context.Context, ix *ShardIndex, inner []int64) (*Chunk, error) {
	s, ok := a.pipe.ab.(*shardingCodec)
	if !ok || !a.Sharded() {
		return nil, &Error{Path: a.path, Err: fmt.Errorf("array is not sharded")}
	}
	i, ok := ix.flat(inner)
	if !ok {
		return nil, &Error{Path: a.path, Err: fmt.Errorf("inner coords %v outside %v", inner, s.grid)}
	}
	o, n, stored := ix.entry(i)
	if !stored {
		m := &ArrayMeta{ChunkShape: s.inner, DataType: a.meta.DataType, Fill: a.meta.Fill}
		return (&Array{meta: m}).fillChunk(), nil
	}
	// The range read is sized from the index: bound it by what the
	// metadata lets an inner chunk take, and by the shard when its size is
	// known.
	if bound := s.innerPipe.storedBound(a.lim.MaxChunkBytes); o > 1<<62 || n > uint64(bound) || (ix.size >= 0 && (o > uint64(ix.size) || n > uint64(ix.size)-o)) {
		return nil, a.shardFail(ix.key, corrupt("inner chunk %v at [%d, +%d) is out of range (at most %d bytes)", inner, o, n, bound))
	}
	ro := storage.Range(int64(o), int64(n))
	ro.IfMatch = ix.etag
	obj, err := a.st.Get(ctx, ix.key, ro)
	if err != nil {
		return nil, a.shardFail(ix.key, err)
	}
	b := obj.Data
	if uint64(len(b)) != n {
		return nil, a.shardFail(ix.key, corrupt("inner chunk %v at [%d, +%d) lies outside the shard", inner, o, n))
	}
	c, err := s.innerPipe.decode(b)
	if err != nil {
		return nil, a.shardFail(ix.key, err)
	}
	return c, nil
}
