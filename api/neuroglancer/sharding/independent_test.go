package sharding

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// An independent reader of the sharded format for the tests, written
// straight from Neuroglancer's sharded.md and sharing nothing with the
// package: it takes the info's "sharding" JSON as a generic map, the shard
// files by name, hashes with its own MurmurHash3 (specialized to 8-byte
// keys, as Neuroglancer's is) and follows the spec's steps for one key.

type specMap struct {
	preshift, minishardBits, shardBits uint
	murmur                             bool
	gzipIndex, gzipData                bool
}

func parseSpecJSON(b []byte) (specMap, error) {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return specMap{}, err
	}
	if m["@type"] != "neuroglancer_uint64_sharded_v1" {
		return specMap{}, fmt.Errorf("@type %v", m["@type"])
	}
	num := func(k string) (uint, error) {
		v, ok := m[k].(float64)
		if !ok || v < 0 || v != float64(uint(v)) {
			return 0, fmt.Errorf("%s: %v", k, m[k])
		}
		return uint(v), nil
	}
	var s specMap
	var err error
	if s.preshift, err = num("preshift_bits"); err != nil {
		return s, err
	}
	if s.minishardBits, err = num("minishard_bits"); err != nil {
		return s, err
	}
	if s.shardBits, err = num("shard_bits"); err != nil {
		return s, err
	}
	switch m["hash"] {
	case "identity":
	case "murmurhash3_x86_128":
		s.murmur = true
	default:
		return s, fmt.Errorf("hash %v", m["hash"])
	}
	enc := func(k string) (bool, error) {
		switch m[k] {
		case nil, "raw":
			return false, nil
		case "gzip":
			return true, nil
		}
		return false, fmt.Errorf("%s: %v", k, m[k])
	}
	if s.gzipIndex, err = enc("minishard_index_encoding"); err != nil {
		return s, err
	}
	s.gzipData, err = enc("data_encoding")
	return s, err
}

// murmur8 is MurmurHash3_x86_128 with seed 0 of the 8 little-endian bytes
// of x, low 64 bits of the result: one 8-byte tail, lanes 1 and 2 only.
func murmur8(x uint64) uint64 {
	rotl := func(v uint32, r uint) uint32 { return v<<r | v>>(32-r) }
	mix := func(h uint32) uint32 {
		h ^= h >> 16
		h *= 0x85ebca6b
		h ^= h >> 13
		h *= 0xc2b2ae35
		return h ^ h>>16
	}
	var h1, h2, h3, h4 uint32
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

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

// specGet looks key up in files (name → contents) as a client would:
// hash, shard file, shard index entry, minishard index, chunk. It returns
// ok=false for a key that is not there.
func specGet(sharding []byte, files map[string][]byte, key uint64) (data []byte, ok bool, err error) {
	s, err := parseSpecJSON(sharding)
	if err != nil {
		return nil, false, err
	}
	h := key >> s.preshift
	if s.preshift >= 64 {
		h = 0
	}
	if s.murmur {
		h = murmur8(h)
	}
	minishard := h & (1<<s.minishardBits - 1)
	shard := (h >> s.minishardBits) & (1<<s.shardBits - 1)
	name := fmt.Sprintf("%x", shard)
	if digits := int(s.shardBits+3) / 4; len(name) < digits {
		name = strings.Repeat("0", digits-len(name)) + name
	}
	file, found := files[name+".shard"]
	if !found {
		return nil, false, nil // a missing shard is an empty one
	}
	indexEnd := uint64(16) << s.minishardBits
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
	idx := file[indexEnd+start : indexEnd+end]
	if s.gzipIndex {
		if idx, err = gunzip(idx); err != nil {
			return nil, false, err
		}
	}
	if len(idx)%24 != 0 {
		return nil, false, fmt.Errorf("minishard index of %d bytes", len(idx))
	}
	n := len(idx) / 24
	word := func(row, col int) uint64 { return binary.LittleEndian.Uint64(idx[8*(row*n+col):]) }
	var id uint64
	pos := indexEnd
	for i := range n {
		id += word(0, i)
		pos += word(1, i)
		size := word(2, i)
		if id == key {
			if pos+size > uint64(len(file)) {
				return nil, false, fmt.Errorf("chunk [%d, +%d) past the file", pos, size)
			}
			data = file[pos : pos+size]
			if s.gzipData {
				if data, err = gunzip(data); err != nil {
					return nil, false, err
				}
			}
			return data, true, nil
		}
		pos += size
	}
	return nil, false, nil
}
