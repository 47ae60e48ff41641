// Package sharding writes and reads Neuroglancer's sharded format,
// neuroglancer_uint64_sharded_v1 (Neuroglancer's
// src/datasource/precomputed/sharded.md): many chunks, each named by a
// uint64 key, packed into a fixed number of shard files that a client
// reads with HTTP Range requests. It imports nothing of the project.
//
// # The format
//
// A Spec (the "sharding" member of a source's info) places every key:
//
//	hashed    = hash(key >> preshift_bits)      identity, or murmurhash3_x86_128
//	minishard = hashed & (2^minishard_bits − 1)
//	shard     = (hashed >> minishard_bits) & (2^shard_bits − 1)
//
// murmurhash3_x86_128 runs with seed 0 over the key's 8 little-endian bytes
// and keeps the low 8 bytes of the 128-bit result as a little-endian uint64,
// h1 | h2<<32 of its four 32-bit words.
//
// Shard n is the file "{n}.shard", n in lowercase hex zero-padded to
// ceil(shard_bits/4) digits ("0.shard" when shard_bits is 0). It starts with
// the shard index, 2^minishard_bits pairs of uint64le [start, end): the
// byte range of each minishard's index, relative to the end of the shard
// index (16·2^minishard_bits bytes); an empty range is an empty minishard. A
// minishard index (raw or gzip, minishard_index_encoding) decodes to 3×n
// uint64le in C order: the n keys, delta coded (the first as is); the start
// of each chunk's data, relative to the end of the previous chunk's (the
// first relative to the end of the shard index); the sizes. Chunk data is
// raw or gzip (data_encoding), each chunk compressed alone; the sizes and
// offsets are those of the stored bytes.
//
// # Writing
//
// A Builder takes (key, data) pairs in any order, sorts them by shard,
// minishard and key, and writes one shard on demand (AppendShard) without
// touching the others, or all of them (WriteAll). This package lays a shard
// out as: shard index, then each minishard's chunks in key order (minishards
// in order), then the minishard indexes in order. A server that builds
// shards lazily gives a Builder only the keys Spec.Locate places in the
// shard asked for: the bytes are the same.
//
// gzip is compress/gzip at level 1, each chunk compressed alone: that costs
// tens of microseconds and about 20 bytes of gzip framing per chunk, so for
// small chunks (annotation records of a few dozen bytes) data_encoding raw
// with a gzip minishard index is the better choice; gzip data pays for
// skeletons, meshes' manifests and lists of many annotations.
//
// ChooseBits picks shard_bits and minishard_bits for a number of keys and
// their total size (the rule is in its documentation); the limits this
// package keeps are MaxShardBits and MaxMinishardBits.
//
// # Reading
//
// A Reader decodes one shard file from an io.ReaderAt: a minishard's index,
// one key's entry or data, every entry. It checks every offset against the
// file and caps what gzip may inflate to, so hostile bytes give an error
// matching ErrMalformed, never a panic or an allocation larger than the file
// or the cap. A server answering Range requests serves the shard file's
// bytes as they are; the Reader is its and the tests' way to look inside.
package sharding

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// Type is the sharding spec's "@type".
const Type = "neuroglancer_uint64_sharded_v1"

// The limits this package keeps (the format allows up to 64 bits): a shard
// index of at most 16 MiB, at most 1024 shard files.
const (
	MaxMinishardBits = 20
	MaxShardBits     = 10
)

// Hash is the spec's "hash": how a (preshifted) key is hashed.
type Hash string

// The hashes Neuroglancer knows.
const (
	Identity Hash = "identity"
	Murmur   Hash = "murmurhash3_x86_128"
)

// Encoding is how minishard indexes or chunk data are stored.
type Encoding string

// The encodings Neuroglancer knows.
const (
	Raw  Encoding = "raw"
	Gzip Encoding = "gzip"
)

// Spec is a sharding specification, the "sharding" member of an info.
type Spec struct {
	PreshiftBits           int      `json:"preshift_bits"`
	Hash                   Hash     `json:"hash"`
	MinishardBits          int      `json:"minishard_bits"`
	ShardBits              int      `json:"shard_bits"`
	MinishardIndexEncoding Encoding `json:"minishard_index_encoding"`
	DataEncoding           Encoding `json:"data_encoding"`
}

// ErrInvalidSpec is matched (errors.Is) by every error Validate returns.
var ErrInvalidSpec = errors.New("invalid sharding spec")

// Validate checks s is a spec this package writes and reads.
func (s Spec) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidSpec, fmt.Sprintf(format, a...))
	}
	switch {
	case s.PreshiftBits < 0 || s.PreshiftBits > 64:
		return bad("preshift_bits %d is outside 0..64", s.PreshiftBits)
	case s.Hash != Identity && s.Hash != Murmur:
		return bad("hash %q is neither %q nor %q", s.Hash, Identity, Murmur)
	case s.MinishardBits < 0 || s.MinishardBits > MaxMinishardBits:
		return bad("minishard_bits %d is outside 0..%d", s.MinishardBits, MaxMinishardBits)
	case s.ShardBits < 0 || s.ShardBits > MaxShardBits:
		return bad("shard_bits %d is outside 0..%d", s.ShardBits, MaxShardBits)
	case s.MinishardIndexEncoding != Raw && s.MinishardIndexEncoding != Gzip:
		return bad("minishard_index_encoding %q is neither %q nor %q", s.MinishardIndexEncoding, Raw, Gzip)
	case s.DataEncoding != Raw && s.DataEncoding != Gzip:
		return bad("data_encoding %q is neither %q nor %q", s.DataEncoding, Raw, Gzip)
	}
	return nil
}

// MarshalJSON writes the spec with its "@type", every member present.
func (s Spec) MarshalJSON() ([]byte, error) {
	type plain Spec
	return json.Marshal(struct {
		Type string `json:"@type"`
		plain
	}{Type, plain(s)})
}

// UnmarshalJSON reads a spec as Neuroglancer does ("@type" required,
// a missing encoding is raw) and validates it.
func (s *Spec) UnmarshalJSON(b []byte) error {
	type plain Spec
	var v struct {
		Type *string `json:"@type"`
		plain
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if v.Type == nil || *v.Type != Type {
		return fmt.Errorf("%w: @type is not %q", ErrInvalidSpec, Type)
	}
	if v.MinishardIndexEncoding == "" {
		v.MinishardIndexEncoding = Raw
	}
	if v.DataEncoding == "" {
		v.DataEncoding = Raw
	}
	if err := Spec(v.plain).Validate(); err != nil {
		return err
	}
	*s = Spec(v.plain)
	return nil
}

// HashKey is the hashed chunk id of key: hash(key >> preshift_bits).
func (s Spec) HashKey(key uint64) uint64 {
	if s.PreshiftBits >= 64 {
		key = 0
	} else {
		key >>= s.PreshiftBits
	}
	if s.Hash == Murmur {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], key)
		h1, h2, _, _ := murmur3x86128(b[:], 0)
		return uint64(h1) | uint64(h2)<<32
	}
	return key
}

// Locate returns the shard and the minishard within it that hold key.
func (s Spec) Locate(key uint64) (shard, minishard uint64) {
	h := s.HashKey(key)
	minishard = h & (1<<s.MinishardBits - 1)
	shard = h >> s.MinishardBits & (1<<s.ShardBits - 1)
	return shard, minishard
}

// NumShards is 2^shard_bits.
func (s Spec) NumShards() uint64 { return 1 << s.ShardBits }

// IndexSize is the size of a shard index, 16·2^minishard_bits bytes.
func (s Spec) IndexSize() int64 { return 16 << s.MinishardBits }

// ShardFile names shard n's file: lowercase hex zero-padded to
// ceil(shard_bits/4) digits, then ".shard".
func (s Spec) ShardFile(shard uint64) string {
	h := strconv.FormatUint(shard, 16)
	if d := (s.ShardBits + 3) / 4; len(h) < d {
		h = strings.Repeat("0", d-len(h)) + h
	}
	return h + ".shard"
}

// ParseShardFile is the inverse of ShardFile: the shard number of a file
// name, accepted only in its one canonical spelling and below NumShards.
func (s Spec) ParseShardFile(name string) (uint64, error) {
	h, ok := strings.CutSuffix(name, ".shard")
	if ok && h != "" && len(h) <= 16 {
		if n, err := strconv.ParseUint(h, 16, 64); err == nil && n < s.NumShards() && s.ShardFile(n) == name {
			return n, nil
		}
	}
	return 0, fmt.Errorf("%q is not a shard file of %d shards", name, s.NumShards())
}

// The targets ChooseBits aims at.
const (
	// TargetShardBytes is the stored size a shard should stay under: small
	// enough to build on a request and hold in a cache, large enough that a
	// big source has few files.
	TargetShardBytes = 32 << 20
	// TargetMinishardKeys is the number of keys a minishard should hold: its
	// index, which a client fetches whole before any of its chunks, is then
	// about 3 KiB raw.
	TargetMinishardKeys = 128
)

// ChooseBits picks shard_bits and minishard_bits for numKeys chunks of
// totalBytes in all. The rule:
//
//	shard_bits     = ceil(log2(totalBytes / TargetShardBytes)), within 0..MaxShardBits
//	minishard_bits = ceil(log2(keys per shard / TargetMinishardKeys)), within 0..MaxMinishardBits
//
// where keys per shard is ceil(numKeys / 2^shard_bits). So a source under
// 32 MiB is one shard, "0.shard"; shards hold 16 to 32 MiB until there
// are 1024 of them, then grow; minishards hold 64 to 128 keys on average
// (fewer when a shard has fewer) until a shard has 2^20 of them, then
// grow. Both are 0 for no keys.
func ChooseBits(numKeys int, totalBytes int64) (shardBits, minishardBits int) {
	if numKeys <= 0 {
		return 0, 0
	}
	shardBits = min(ceilLog2((uint64(max(totalBytes, 0))+TargetShardBytes-1)/TargetShardBytes), MaxShardBits)
	perShard := (uint64(numKeys) + 1<<shardBits - 1) >> shardBits
	minishardBits = min(ceilLog2((perShard+TargetMinishardKeys-1)/TargetMinishardKeys), MaxMinishardBits)
	return shardBits, minishardBits
}

// ceilLog2 is the least b with 2^b ≥ n (0 for n ≤ 1).
func ceilLog2(n uint64) int {
	if n <= 1 {
		return 0
	}
	return bits.Len64(n - 1)
}
