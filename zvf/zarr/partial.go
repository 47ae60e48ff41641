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
	s, ok := a.pipe.ab.(*shardingCodec)
	if !ok || !a.Sharded() {
		return nil, &Error{Path: a.path, Err: fmt.Errorf("array is not sharded")}
	}
	if err := a.checkCoords(shard); err != nil {
		return nil, &Error{Path: a.path, Err: err}
	}
	if len(inner) != len(s.grid) {
		return nil, &Error{Path: a.path, Err: fmt.Errorf("inner coords %v for rank %d", inner, len(s.grid))}
	}
	var idx int64
	for i, c := range inner {
		if c < 0 || c >= s.grid[i] {
			return nil, &Error{Path: a.path, Err: fmt.Errorf("inner coords %v outside %v", inner, s.grid)}
		}
		idx = idx*s.grid[i] + c
	}
	key := a.ChunkKey(shard)
	fail := func(err error) (*Chunk, error) {
		var ze *Error
		if errors.As(err, &ze) {
			ze.Path, ze.Chunk = a.path, key
			return nil, ze
		}
		return nil, &Error{Path: a.path, Chunk: key, Codec: "sharding_indexed", Err: err}
	}
	fill := func() *Chunk {
		m := &ArrayMeta{ChunkShape: s.inner, DataType: a.meta.DataType, Fill: a.meta.Fill}
		return (&Array{meta: m}).fillChunk()
	}
	// The index and the inner chunk are read as one version of the shard:
	// the second read is pinned to the first's (If-Match on S3).
	var off int64
	pin := ""
	shardSize := int64(-1)
	if !s.atStart {
		at, err := a.st.Stat(ctx, key)
		if errors.Is(err, storage.ErrNotFound) {
			return fill(), nil
		}
		if err != nil {
			return fail(err)
		}
		if at.Size < s.indexLen {
			return fail(corrupt("shard of %d bytes cannot hold its %d-byte index", at.Size, s.indexLen))
		}
		off = at.Size - s.indexLen
		pin = at.ETag
		shardSize = off
	}
	ro := storage.Range(off, s.indexLen)
	ro.IfMatch = pin
	idxObj, err := a.st.Get(ctx, key, ro)
	if errors.Is(err, storage.ErrNotFound) {
		return fill(), nil
	}
	if err != nil {
		return fail(err)
	}
	raw := idxObj.Data
	if int64(len(raw)) != s.indexLen {
		return fail(corrupt("shard index read %d bytes, want %d", len(raw), s.indexLen))
	}
	ic, err := s.indexPipe.decode(raw)
	if err != nil {
		return fail(err)
	}
	o := binary.LittleEndian.Uint64(ic.Data[16*idx:])
	n := binary.LittleEndian.Uint64(ic.Data[16*idx+8:])
	if o == ^uint64(0) && n == ^uint64(0) {
		return fill(), nil
	}
	// The range read is sized from the index: bound it by what the
	// metadata lets an inner chunk take, and by the shard when its size is
	// known.
	if bound := s.innerPipe.storedBound(a.lim.MaxChunkBytes); o > 1<<62 || n > uint64(bound) || (shardSize >= 0 && (o > uint64(shardSize) || n > uint64(shardSize)-o)) {
		return fail(corrupt("inner chunk at [%d, +%d) is out of range (at most %d bytes)", o, n, bound))
	}
	ro = storage.Range(int64(o), int64(n))
	ro.IfMatch = idxObj.Attrs.ETag
	obj, err := a.st.Get(ctx, key, ro)
	if err != nil {
		return fail(err)
	}
	b := obj.Data
	if uint64(len(b)) != n {
		return fail(corrupt("inner chunk at [%d, +%d) lies outside the shard", o, n))
	}
	c, err := s.innerPipe.decode(b)
	if err != nil {
		return fail(err)
	}
	return c, nil
}
