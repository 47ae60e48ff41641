// Package shardingtest is an independent reader of Neuroglancer's
// sharded format for tests, written straight from Neuroglancer's
// sharded.md and sharing nothing with package sharding or the server: it
// takes the info's "sharding" JSON as a generic map, hashes with its own
// MurmurHash3 (specialised to 8-byte keys, as Neuroglancer's is) and
// follows the spec's steps for one key. Callers fetch the bytes: Get from
// shard files in memory, the server's tests by Range requests as
// Neuroglancer does.
package shardingtest

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Spec is a source's "sharding" as sharded.md describes it.
type Spec struct {
	Preshift, MinishardBits, ShardBits uint
	Murmur, GzipIndex, GzipData        bool
}

// ParseSpec reads a "sharding" JSON object, within the limits the
// format promises: preshift_bits ≤ 64, minishard_bits ≤ 20, shard_bits ≤
// 10.
func ParseSpec(raw []byte) (Spec, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return Spec{}, err
	}
	if m["@type"] != "neuroglancer_uint64_sharded_v1" {
		return Spec{}, fmt.Errorf("@type %v", m["@type"])
	}
	num := func(k string, most uint) (uint, error) {
		v, ok := m[k].(float64)
		if !ok || v < 0 || v > float64(most) || v != float64(uint(v)) {
			return 0, fmt.Errorf("%s: %v", k, m[k])
		}
		return uint(v), nil
	}
	var s Spec
	var err error
	if s.Preshift, err = num("preshift_bits", 64); err != nil {
		return s, err
	}
	if s.MinishardBits, err = num("minishard_bits", 20); err != nil {
		return s, err
	}
	if s.ShardBits, err = num("shard_bits", 10); err != nil {
		return s, err
	}
	switch m["hash"] {
	case "identity":
	case "murmurhash3_x86_128":
		s.Murmur = true
	default:
		return s, fmt.Errorf("hash %v", m["hash"])
	}
	gzipped := func(k string) (bool, error) {
		switch m[k] {
		case nil, "raw":
			return false, nil
		case "gzip":
			return true, nil
		}
		return false, fmt.Errorf("%s: %v", k, m[k])
	}
	if s.GzipIndex, err = gzipped("minishard_index_encoding"); err != nil {
		return s, err
	}
	s.GzipData, err = gzipped("data_encoding")
	return s, err
}

// Murmur8 is MurmurHash3_x86_128 with seed 0 of the 8 little-endian bytes
// of x, low 64 bits of the result: one 8-byte tail, lanes 1 and 2 only.
func Murmur8(x uint64) uint64 {
	rotl := func(v uint32, r uint) uint32 { return v<<r | v>>(32-r) }
	mix := func(h uint32) uint32 {
		h ^= h >> 16
		h *= 0x85ebca6b
		h ^= h >> 13
		h *= 0xc2b2ae35
		return h ^ h>>16
	}
	var h1, h2, h3, h4 uint32
	// An 8-byte key is all tail: k2 (bytes 4..7) then k1 (bytes 0..3).
	h2 ^= rotl(uint32(x>>32)*0xab0e9789, 16) * 0x38b34ae5
	h1 ^= rotl(uint32(x)*0x239b961b, 15) * 0xab0e9789
	h1, h2, h3, h4 = h1^8, h2^8, h3^8, h4^8
	h1 = h1 + h2 + h3 + h4
	h2, h3, h4 = h2+h1, h3+h1, h4+h1
	h1, h2, h3, h4 = mix(h1), mix(h2), mix(h3), mix(h4)
	h1 = h1 + h2 + h3 + h4
	h2 += h1
	return uint64(h1) | uint64(h2)<<32
}

// Locate is where key is: its shard, the shard's file name and its
// minishard.
func (s Spec) Locate(key uint64) (shard uint64, file string, minishard uint64) {
	h := uint64(0)
	if s.Preshift < 64 {
		h = key >> s.Preshift
	}
	if s.Murmur {
		h = Murmur8(h)
	}
	minishard = h & (1<<s.MinishardBits - 1)
	shard = h >> s.MinishardBits & (1<<s.ShardBits - 1)
	name := strconv.FormatUint(shard, 16)
	if digits := int(s.ShardBits+3) / 4; len(name) < digits {
		name = strings.Repeat("0", digits-len(name)) + name
	}
	return shard, name + ".shard", minishard
}

// IndexEnd is the size of a shard file's index, a [start, end) pair of
// uint64s per minishard; the offsets in it count from there.
func (s Spec) IndexEnd() uint64 { return 16 << s.MinishardBits }

// Entry is a chunk a minishard index names: its key, and where its bytes
// are in the shard file.
type Entry struct{ Key, Start, Size uint64 }

// Minishard decodes a minishard index: three delta-coded columns of keys,
// offsets (from the end of the previous chunk) and sizes.
func (s Spec) Minishard(idx []byte) ([]Entry, error) {
	if s.GzipIndex {
		var err error
		if idx, err = gunzip(idx); err != nil {
			return nil, err
		}
	}
	if len(idx)%24 != 0 {
		return nil, fmt.Errorf("minishard index of %d bytes", len(idx))
	}
	n := len(idx) / 24
	word := func(row, col int) uint64 { return binary.LittleEndian.Uint64(idx[8*(row*n+col):]) }
	out := make([]Entry, n)
	var key uint64
	pos := s.IndexEnd()
	for i := range n {
		key += word(0, i)
		pos += word(1, i)
		out[i] = Entry{Key: key, Start: pos, Size: word(2, i)}
		pos += out[i].Size
	}
	return out, nil
}

// Chunk decodes a chunk's stored bytes.
func (s Spec) Chunk(b []byte) ([]byte, error) {
	if !s.GzipData {
		return b, nil
	}
	return gunzip(b)
}

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

// Get looks key up in files (name → contents) as a client would: hash,
// shard file, shard index entry, minishard index, chunk. It returns
// ok=false for a key that is not there.
func Get(sharding []byte, files map[string][]byte, key uint64) (data []byte, ok bool, err error) {
	s, err := ParseSpec(sharding)
	if err != nil {
		return nil, false, err
	}
	_, name, minishard := s.Locate(key)
	file, found := files[name]
	if !found {
		return nil, false, nil // a missing shard is an empty one
	}
	indexEnd := s.IndexEnd()
	if uint64(len(file)) < indexEnd {
		return nil, false, fmt.Errorf("%s: %d bytes", name, len(file))
	}
	start := binary.LittleEndian.Uint64(file[16*minishard:])
	end := binary.LittleEndian.Uint64(file[16*minishard+8:])
	if start == end {
		return nil, false, nil
	}
	if start > end || indexEnd+end > uint64(len(file)) {
		return nil, false, fmt.Errorf("minishard index [%d, %d)", start, end)
	}
	entries, err := s.Minishard(file[indexEnd+start : indexEnd+end])
	if err != nil {
		return nil, false, err
	}
	for _, e := range entries {
		if e.Key != key {
			continue
		}
		if e.Start+e.Size > uint64(len(file)) {
			return nil, false, fmt.Errorf("chunk [%d, +%d) past the file", e.Start, e.Size)
		}
		data, err = s.Chunk(file[e.Start : e.Start+e.Size])
		return data, err == nil, err
	}
	return nil, false, nil
}
