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
// of the shard index (see Layout).
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
	sized := make([]Sized, len(es))
	for i, e := range es {
		start := len(dst)
		var err error
		if dst, err = b.appendEncoded(dst, e.data, b.spec.DataEncoding); err != nil {
			return dst[:base], err
		}
		sized[i] = Sized{Key: e.key, Size: int64(len(dst) - start)}
	}
	lay, err := b.Layout(es[0].shard, sized)
	if err != nil {
		return dst[:base], err
	}
	copy(dst[base:], lay.Head)
	return append(dst, lay.Tail...), nil
}

// Sized is a chunk of a shard as it is stored: its key and the size of its
// stored (encoded) bytes.
type Sized struct {
	Key  uint64
	Size int64
}

// Layout is a shard file without its chunk data: the shard index (Head,
// the file's first bytes) and the minishard indexes (Tail, from TailStart
// to the file's end, Size), the chunks' stored bytes lying between them.
// A server can answer a byte range of a shard from it and the few chunks
// the range covers (Chunk finds them), without the rest of the shard's
// data; it holds about 8 bytes a minishard besides the indexes.
type Layout struct {
	Head      []byte
	Tail      []byte
	TailStart int64
	Size      int64
	spec      Spec
	shard     uint64
	starts    []int64 // where each minishard's chunk data starts (non-decreasing)
}

// Bytes is about what a Layout holds in memory.
func (l *Layout) Bytes() int64 { return int64(len(l.Head)+len(l.Tail)) + 8*int64(len(l.starts)) + 128 }

// Chunk returns the chunk whose stored bytes hold byte off of the shard
// file, read from its minishard's index.
func (l *Layout) Chunk(off int64) (Entry, error) {
	if off < int64(len(l.Head)) || off >= l.TailStart {
		return Entry{}, fmt.Errorf("sharding: byte %d is not chunk data (%d to %d)", off, len(l.Head), l.TailStart)
	}
	m := sort.Search(len(l.starts), func(i int) bool { return l.starts[i] > off }) - 1
	r, err := NewReader(l.spec, l.shard, layoutAt{l}, l.Size)
	if err != nil {
		return Entry{}, err
	}
	es, err := r.MinishardIndex(uint64(m))
	if err != nil {
		return Entry{}, err
	}
	i := sort.Search(len(es), func(i int) bool { return es[i].Offset+es[i].Size > off })
	if i == len(es) || es[i].Offset > off {
		return Entry{}, fmt.Errorf("sharding: byte %d is in no chunk of minishard %d", off, m)
	}
	return es[i], nil
}

// Largest returns the largest chunk whose stored bytes overlap the bytes
// [lo, hi) of the shard file (Size 0: none does), reading only the
// minishard indexes of the data the span covers: a server can know,
// before it sends a byte, whether an answer reaches a chunk too large to
// build.
func (l *Layout) Largest(lo, hi int64) (Entry, error) {
	lo, hi = max(lo, int64(len(l.Head))), min(hi, l.TailStart)
	var big Entry
	if lo >= hi {
		return big, nil
	}
	r, err := NewReader(l.spec, l.shard, layoutAt{l}, l.Size)
	if err != nil {
		return big, err
	}
	first := sort.Search(len(l.starts), func(i int) bool { return l.starts[i] > lo }) - 1
	for m := max(first, 0); m < len(l.starts) && l.starts[m] < hi; m++ {
		end := l.TailStart
		if m+1 < len(l.starts) {
			end = l.starts[m+1]
		}
		if end == l.starts[m] {
			continue // a minishard with no chunk
		}
		es, err := r.MinishardIndex(uint64(m))
		if err != nil {
			return Entry{}, err
		}
		for _, e := range es {
			if e.Offset < hi && e.Offset+e.Size > lo && e.Size > big.Size {
				big = e
			}
		}
	}
	return big, nil
}

// layoutAt reads a Layout's indexes as a file whose chunk data is missing.
type layoutAt struct{ l *Layout }

func (a layoutAt) ReadAt(p []byte, off int64) (int, error) {
	l := a.l
	switch end := off + int64(len(p)); {
	case off >= 0 && end <= int64(len(l.Head)):
		return copy(p, l.Head[off:]), nil
	case off >= l.TailStart && end <= l.Size:
		return copy(p, l.Tail[off-l.TailStart:]), nil
	}
	return 0, fmt.Errorf("sharding: [%d, +%d) is chunk data, which a layout does not hold", off, len(p))
}

// Layout lays out shard n whose chunks, each placed in n by Locate, are
// stored in the given sizes (EncodeChunk's); their order does not matter.
// A shard without chunks is ErrEmptyShard.
func (b *Builder) Layout(shard uint64, chunks []Sized) (*Layout, error) {
	if len(chunks) == 0 {
		return nil, fmt.Errorf("sharding: shard %d: %w", shard, ErrEmptyShard)
	}
	type placed struct {
		minishard uint64
		Sized
	}
	ps := make([]placed, len(chunks))
	for i, c := range chunks {
		sh, m := b.spec.Locate(c.Key)
		if sh != shard {
			return nil, fmt.Errorf("sharding: key %d is in shard %d, not %d", c.Key, sh, shard)
		}
		ps[i] = placed{m, c}
	}
	slices.SortFunc(ps, func(x, y placed) int {
		if x.minishard != y.minishard {
			return cmpU64(x.minishard, y.minishard)
		}
		return cmpU64(x.Key, y.Key)
	})
	indexSize := b.spec.IndexSize()
	lay := &Layout{Head: make([]byte, indexSize), spec: b.spec, shard: shard, starts: make([]int64, 1<<b.spec.MinishardBits)}
	starts := make([]int64, len(ps)) // each chunk's, in the file
	end := indexSize
	m := 0
	for i, p := range ps {
		if i > 0 && p.Key == ps[i-1].Key {
			return nil, fmt.Errorf("sharding: %w: %d", ErrDuplicateKey, p.Key)
		}
		for ; uint64(m) <= p.minishard; m++ {
			lay.starts[m] = end
		}
		starts[i] = end
		end += p.Size
	}
	for ; m < len(lay.starts); m++ {
		lay.starts[m] = end
	}
	lay.TailStart = end
	// Minishard indexes, and their ranges in the shard index; offsets
	// count from the end of the shard index.
	for i := 0; i < len(ps); {
		j := i + 1
		for j < len(ps) && ps[j].minishard == ps[i].minishard {
			j++
		}
		n := j - i
		idx := slices.Grow(b.index[:0], 3*n)[:3*n]
		var prevKey, prevEnd uint64
		for k := range n {
			c := ps[i+k]
			start := uint64(starts[i+k] - indexSize)
			idx[k] = c.Key - prevKey
			idx[n+k] = start - prevEnd
			idx[2*n+k] = uint64(c.Size)
			prevKey, prevEnd = c.Key, start+uint64(c.Size)
		}
		b.index = idx
		raw := b.raw[:0]
		for _, v := range idx {
			raw = binary.LittleEndian.AppendUint64(raw, v)
		}
		b.raw = raw
		start := lay.TailStart + int64(len(lay.Tail)) - indexSize
		var err error
		if lay.Tail, err = b.appendEncoded(lay.Tail, raw, b.spec.MinishardIndexEncoding); err != nil {
			return nil, err
		}
		slot := 16 * int(ps[i].minishard)
		binary.LittleEndian.PutUint64(lay.Head[slot:], uint64(start))
		binary.LittleEndian.PutUint64(lay.Head[slot+8:], uint64(lay.TailStart+int64(len(lay.Tail))-indexSize))
		i = j
	}
	lay.Size = lay.TailStart + int64(len(lay.Tail))
	return lay, nil
}

// EncodeChunk appends data to dst as a shard stores it (gzip for a Gzip
// data_encoding): the bytes AppendShard writes for it, so that a chunk
// built again stores in the size its Layout gave it.
func (b *Builder) EncodeChunk(dst, data []byte) ([]byte, error) {
	return b.appendEncoded(dst, data, b.spec.DataEncoding)
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
