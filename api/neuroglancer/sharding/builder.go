package sharding

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
)

// ErrEmptyShard is returned for a shard no key is placed in: its file does
// not exist (a client takes a missing shard for an empty one; a server
// answers 404).
var ErrEmptyShard = errors.New("no key in this shard")

// ErrDuplicateKey is matched by the error for a key added twice.
var ErrDuplicateKey = errors.New("key added twice")

// Builder collects (key, data) pairs and writes shard files. Its methods
// are not safe for concurrent use; the shards it returns are new memory,
// owned by the caller.
type Builder struct {
	spec    Spec
	entries []entry
	sorted  bool
	gz      *gzip.Writer
	zbuf    bytes.Buffer
	index   []uint64 // one minishard index, before encoding
	raw     []byte   // the same, as bytes
	placed  []uint64 // (start, size) of each stored chunk of a shard
}

type entry struct {
	shard, minishard uint64
	key              uint64
	data             []byte
}

// NewBuilder returns a Builder writing shards of spec.
func NewBuilder(spec Spec) (*Builder, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return &Builder{spec: spec}, nil
}

// Grow makes room for n more chunks, so that adding a known number of
// chunks allocates once.
func (b *Builder) Grow(n int) { b.entries = slices.Grow(b.entries, n) }

// Add adds a chunk. data is kept, not copied, until the Builder is done
// with; it may be empty. Adding a key twice is an error at the next
// Shards, AppendShard or WriteAll.
func (b *Builder) Add(key uint64, data []byte) {
	s, m := b.spec.Locate(key)
	b.entries = append(b.entries, entry{shard: s, minishard: m, key: key, data: data})
	b.sorted = false
}

// sort orders the entries by shard, minishard and key, once after adds.
func (b *Builder) sort() error {
	if b.sorted {
		return nil
	}
	slices.SortFunc(b.entries, func(x, y entry) int {
		switch {
		case x.shard != y.shard:
			return cmpU64(x.shard, y.shard)
		case x.minishard != y.minishard:
			return cmpU64(x.minishard, y.minishard)
		}
		return cmpU64(x.key, y.key)
	})
	for i := 1; i < len(b.entries); i++ {
		if b.entries[i].key == b.entries[i-1].key {
			return fmt.Errorf("sharding: %w: %d", ErrDuplicateKey, b.entries[i].key)
		}
	}
	b.sorted = true
	return nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Shards returns the numbers of the shards that hold a key, in order.
func (b *Builder) Shards() ([]uint64, error) {
	if err := b.sort(); err != nil {
		return nil, err
	}
	var out []uint64
	for i, e := range b.entries {
		if i == 0 || e.shard != b.entries[i-1].shard {
			out = append(out, e.shard)
		}
	}
	return out, nil
}

// AppendShard appends shard n's file to dst, reading only that shard's
// chunks. A shard without keys is ErrEmptyShard.
func (b *Builder) AppendShard(dst []byte, shard uint64) ([]byte, error) {
	if err := b.sort(); err != nil {
		return dst, err
	}
	lo := sort.Search(len(b.entries), func(i int) bool { return b.entries[i].shard >= shard })
	hi := lo + sort.Search(len(b.entries)-lo, func(i int) bool { return b.entries[lo+i].shard > shard })
	if lo == hi {
		return dst, fmt.Errorf("sharding: shard %d: %w", shard, ErrEmptyShard)
	}
	return b.appendShard(dst, b.entries[lo:hi])
}

// WriteAll writes every shard that holds a key, in order, as
// write(file name, file contents); the contents are new memory each time.
func (b *Builder) WriteAll(write func(name string, data []byte) error) error {
	shards, err := b.Shards()
	if err != nil {
		return err
	}
	for _, n := range shards {
		data, err := b.AppendShard(nil, n)
		if err != nil {
			return err
		}
		if err := write(b.spec.ShardFile(n), data); err != nil {
			return err
		}
	}
	return nil
}

// appendShard lays out one shard: the shard index, each minishard's chunks
// in key order, then the minishard indexes, all offsets relative to the end
// of the shard index.
func (b *Builder) appendShard(dst []byte, es []entry) ([]byte, error) {
	base := len(dst)
	indexSize := int(b.spec.IndexSize())
	// Room for the whole shard at once: exact for raw, and gzip seldom
	// stores a chunk in more than its size and the 18 bytes of framing.
	need := indexSize + 24*len(es)
	for _, e := range es {
		need += len(e.data)
		if b.spec.DataEncoding == Gzip {
			need += 18
		}
	}
	dst = slices.Grow(dst, need)
	dst = dst[:base+indexSize]
	clear(dst[base:])
	body := base + indexSize // where offsets count from

	// Chunk data, with where each stored chunk went.
	sizes := b.placed[:0]
	for _, e := range es {
		start := len(dst)
		var err error
		if dst, err = b.appendEncoded(dst, e.data, b.spec.DataEncoding); err != nil {
			return dst[:base], err
		}
		sizes = append(sizes, uint64(start-body), uint64(len(dst)-start))
	}
	b.placed = sizes

	// Minishard indexes, and their ranges in the shard index.
	for i := 0; i < len(es); {
		j := i + 1
		for j < len(es) && es[j].minishard == es[i].minishard {
			j++
		}
		n := j - i
		idx := slices.Grow(b.index[:0], 3*n)[:3*n]
		var prevKey, prevEnd uint64
		for k := range n {
			e, start, size := es[i+k], sizes[2*(i+k)], sizes[2*(i+k)+1]
			idx[k] = e.key - prevKey
			idx[n+k] = start - prevEnd
			idx[2*n+k] = size
			prevKey, prevEnd = e.key, start+size
		}
		b.index = idx
		raw := b.raw[:0]
		for _, v := range idx {
			raw = binary.LittleEndian.AppendUint64(raw, v)
		}
		b.raw = raw
		start := len(dst)
		var err error
		if dst, err = b.appendEncoded(dst, raw, b.spec.MinishardIndexEncoding); err != nil {
			return dst[:base], err
		}
		slot := base + 16*int(es[i].minishard)
		binary.LittleEndian.PutUint64(dst[slot:], uint64(start-body))
		binary.LittleEndian.PutUint64(dst[slot+8:], uint64(len(dst)-body))
		i = j
	}
	return dst, nil
}

// appendEncoded appends data, gzip-compressed for Gzip.
func (b *Builder) appendEncoded(dst, data []byte, enc Encoding) ([]byte, error) {
	if enc != Gzip {
		return append(dst, data...), nil
	}
	b.zbuf.Reset()
	if b.gz == nil {
		// Level 1: shards are built when first asked for, and at the sizes
		// of chunks (records, skeletons, manifests) deeper search gains
		// little.
		b.gz, _ = gzip.NewWriterLevel(&b.zbuf, gzip.BestSpeed) // a valid level: no error
	} else {
		b.gz.Reset(&b.zbuf)
	}
	if _, err := b.gz.Write(data); err != nil {
		return dst, fmt.Errorf("sharding: gzip: %w", err)
	}
	if err := b.gz.Close(); err != nil {
		return dst, fmt.Errorf("sharding: gzip: %w", err)
	}
	return append(dst, b.zbuf.Bytes()...), nil
}
