package zarr

import (
	"encoding/binary"
	"encoding/json"
)

// shardingCodec is sharding_indexed: a shard holds inner chunks encoded
// with their own codec chain plus an index of (offset, nbytes) uint64
// pairs, at the start or the end, itself encoded with the index codecs.
// Missing inner chunks (offset and nbytes all ones) read as the fill value.
// Nested sharding works because the inner chain may hold another
// sharding codec.
func makeSharding(cs *Codecs, s CodecSpec, in rep) (resolved, error) {
	return arrayToBytesCodec(cs.newSharding(s.Configuration, in))
}

type shardingCodec struct {
	inner     []int64
	grid      []int64 // inner chunks per shard along each axis
	n         int64
	innerPipe *pipeline
	indexPipe *pipeline
	indexLen  int64
	atStart   bool
}

func (cs *Codecs) newSharding(cfg json.RawMessage, in rep) (*shardingCodec, error) {
	var c struct {
		ChunkShape    []int64           `json:"chunk_shape"`
		Codecs        []json.RawMessage `json:"codecs"`
		IndexCodecs   []json.RawMessage `json:"index_codecs"`
		IndexLocation string            `json:"index_location"`
	}
	if err := json.Unmarshal(cfg, &c); err != nil {
		return nil, metaErr("sharding_indexed configuration: %v", err)
	}
	if len(c.ChunkShape) != len(in.shape) {
		return nil, metaErr("sharding chunk_shape %v does not match rank %d", c.ChunkShape, len(in.shape))
	}
	s := &shardingCodec{inner: c.ChunkShape, grid: make([]int64, len(in.shape)), n: 1}
	for i, v := range c.ChunkShape {
		if v <= 0 || in.shape[i]%v != 0 {
			return nil, metaErr("sharding chunk_shape %v does not divide the shard shape %v", c.ChunkShape, in.shape)
		}
		s.grid[i] = in.shape[i] / v
		s.n *= s.grid[i]
	}
	switch c.IndexLocation {
	case "", "end":
	case "start":
		s.atStart = true
	default:
		return nil, metaErr("sharding index_location %q", c.IndexLocation)
	}
	innerSpecs, err := parseCodecSpecs(c.Codecs)
	if err != nil {
		return nil, err
	}
	if s.innerPipe, err = cs.build("inner chunk", innerSpecs, rep{shape: c.ChunkShape, typ: in.typ, fill: in.fill}); err != nil {
		return nil, err
	}
	indexSpecs, err := parseCodecSpecs(c.IndexCodecs)
	if err != nil {
		return nil, err
	}
	u64, _ := ParseDataType("uint64")
	ishape := append(append([]int64{}, s.grid...), 2)
	if s.indexPipe, err = cs.build("sharding index", indexSpecs, rep{shape: ishape, typ: u64, fill: make([]byte, 8)}); err != nil {
		return nil, err
	}
	// The index must have a fixed encoded size to be found without
	// reading the whole shard: bytes (+ crc32c) only.
	s.indexLen = s.indexPipe.ab.encodedSize(s.indexPipe.abIn)
	for _, bb := range s.indexPipe.bb {
		if bb.name() != "crc32c" {
			return nil, unsupported("sharding index codec %s (its size is not fixed)", bb.name())
		}
		s.indexLen += 4
	}
	if s.indexLen < 0 {
		return nil, unsupported("sharding index codecs without a fixed size")
	}
	return s, nil
}

func (*shardingCodec) name() string          { return "sharding_indexed" }
func (*shardingCodec) encodedSize(rep) int64 { return -1 }

// index decodes the shard index from the shard's bytes.
func (s *shardingCodec) index(b []byte) ([]byte, error) {
	if int64(len(b)) < s.indexLen {
		return nil, corrupt("shard of %d bytes cannot hold its %d-byte index", len(b), s.indexLen)
	}
	raw := b[int64(len(b))-s.indexLen:]
	if s.atStart {
		raw = b[:s.indexLen]
	}
	c, err := s.indexPipe.decode(append([]byte(nil), raw...))
	if err != nil {
		return nil, err
	}
	return c.Data, nil
}

func (s *shardingCodec) decode(b []byte, r rep) (*Chunk, error) {
	idx, err := s.index(b)
	if err != nil {
		return nil, err
	}
	// The shard's element count passed checkRep when the array opened, so
	// the output is bounded by MaxChunkBytes whatever the index says.
	out := (&Array{meta: &ArrayMeta{ChunkShape: r.shape, DataType: r.typ, Fill: r.fill}}).fillChunk()
	m := &ArrayMeta{Shape: r.shape, ChunkShape: s.inner, DataType: r.typ}
	// Stored inner chunks do not overlap, so together they fit in the
	// shard: an index naming one range many times would make each inner
	// decode (and its copy) repeat the whole shard.
	var claimed uint64
	for i := int64(0); i < s.n; i++ {
		if n := binary.LittleEndian.Uint64(idx[16*i+8:]); binary.LittleEndian.Uint64(idx[16*i:]) != ^uint64(0) || n != ^uint64(0) {
			if claimed += n; n > uint64(len(b)) || claimed > uint64(len(b)) {
				return nil, corrupt("inner chunks claim more than the %d-byte shard", len(b))
			}
		}
	}
	coords := make([]int64, len(s.grid))
	for i := int64(0); i < s.n; i++ {
		off := binary.LittleEndian.Uint64(idx[16*i:])
		n := binary.LittleEndian.Uint64(idx[16*i+8:])
		if off == ^uint64(0) && n == ^uint64(0) {
			Advance(coords, s.grid)
			continue
		}
		if off > uint64(len(b)) || n > uint64(len(b))-off {
			return nil, corrupt("inner chunk %v at [%d, +%d) lies outside the %d-byte shard", coords, off, n, len(b))
		}
		c, err := s.innerPipe.decode(append([]byte(nil), b[off:off+n]...))
		if err != nil {
			return nil, err
		}
		copyChunkInto(out, c, coords, m)
		Advance(coords, s.grid)
	}
	return out, nil
}

func (s *shardingCodec) encode(c *Chunk, r rep) ([]byte, error) {
	return nil, unsupported("writing sharded arrays")
}
