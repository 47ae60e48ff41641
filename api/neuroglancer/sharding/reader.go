package sharding

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ErrMalformed is matched (errors.Is) by every *Error: the shard's bytes
// break the format.
var ErrMalformed = errors.New("malformed shard")

// ErrNotFound is returned for a key the shard does not hold.
var ErrNotFound = errors.New("key not in shard")

// Error describes malformed shard bytes.
type Error struct {
	Offset int64 // byte offset in the shard file the problem was found at
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("sharding: malformed shard: %s (at byte %d)", e.Reason, e.Offset)
}

// Is makes every *Error match ErrMalformed.
func (e *Error) Is(t error) bool { return t == ErrMalformed }

func malformed(off int64, format string, a ...any) error {
	return &Error{Offset: off, Reason: fmt.Sprintf(format, a...)}
}

// DefaultMaxDecoded is a Reader's default cap on what one gzip minishard
// index or chunk may inflate to.
const DefaultMaxDecoded = 256 << 20

// Entry is where one chunk's stored bytes are in a shard file.
type Entry struct {
	Key    uint64
	Offset int64 // from the start of the file
	Size   int64 // stored (possibly gzip) bytes
}

// Reader reads one shard file. Its methods may be called concurrently when
// the io.ReaderAt allows it.
type Reader struct {
	spec  Spec
	shard uint64
	r     io.ReaderAt
	size  int64
	// MaxDecoded caps what one gzip minishard index or chunk may inflate to
	// (NewReader sets DefaultMaxDecoded); more is an error.
	MaxDecoded int64
}

// NewReader returns a Reader of shard number shard of spec, whose file is
// size bytes read through r.
func NewReader(spec Spec, shard uint64, r io.ReaderAt, size int64) (*Reader, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if shard >= spec.NumShards() {
		return nil, fmt.Errorf("sharding: shard %d of %d", shard, spec.NumShards())
	}
	if size < spec.IndexSize() {
		return nil, malformed(0, "%d bytes, shorter than the %d-byte shard index", size, spec.IndexSize())
	}
	return &Reader{spec: spec, shard: shard, r: r, size: size, MaxDecoded: DefaultMaxDecoded}, nil
}

// MinishardIndex returns the entries of minishard m, in the order the
// index lists them.
func (r *Reader) MinishardIndex(m uint64) ([]Entry, error) {
	if m >= 1<<r.spec.MinishardBits {
		return nil, fmt.Errorf("sharding: minishard %d of %d", m, 1<<r.spec.MinishardBits)
	}
	var pair [16]byte
	at := int64(16 * m)
	if err := readAt(r.r, pair[:], at); err != nil {
		return nil, fmt.Errorf("sharding: reading the shard index: %w", err)
	}
	start, end := binary.LittleEndian.Uint64(pair[:]), binary.LittleEndian.Uint64(pair[8:])
	if start == end {
		return nil, nil
	}
	body := r.spec.IndexSize()
	if start > end || end > uint64(r.size-body) {
		return nil, malformed(at, "minishard %d index at [%d, %d) past the end of the shard's %d bytes after its index", m, start, end, r.size-body)
	}
	raw, err := r.read(body+int64(start), int64(end-start), r.spec.MinishardIndexEncoding)
	if err != nil {
		return nil, err
	}
	if len(raw)%24 != 0 {
		return nil, malformed(body+int64(start), "minishard %d index is %d bytes, not a multiple of 24", m, len(raw))
	}
	n := len(raw) / 24
	entries := make([]Entry, n)
	var key, prevEnd uint64
	for i := range entries {
		dk := binary.LittleEndian.Uint64(raw[8*i:])
		ds := binary.LittleEndian.Uint64(raw[8*(n+i):])
		size := binary.LittleEndian.Uint64(raw[8*(2*n+i):])
		if i > 0 && key+dk < key {
			return nil, malformed(body+int64(start), "minishard %d: key %d overflows", m, i)
		}
		key += dk
		s := prevEnd + ds
		if s < prevEnd || s > uint64(r.size-body) || size > uint64(r.size-body)-s {
			return nil, malformed(body+int64(start), "minishard %d: key %d's data at +%d (+%d bytes) is past the end of the shard", m, key, s, size)
		}
		if sh, mi := r.spec.Locate(key); sh != r.shard || mi != m {
			return nil, malformed(body+int64(start), "minishard %d of shard %d lists key %d, which belongs to minishard %d of shard %d", m, r.shard, key, mi, sh)
		}
		prevEnd = s + size
		entries[i] = Entry{Key: key, Offset: body + int64(s), Size: int64(size)}
	}
	return entries, nil
}

// Entries returns every entry of the shard, minishard by minishard.
func (r *Reader) Entries() ([]Entry, error) {
	var all []Entry
	for m := range uint64(1) << r.spec.MinishardBits {
		es, err := r.MinishardIndex(m)
		if err != nil {
			return nil, err
		}
		all = append(all, es...)
	}
	return all, nil
}

// Find returns key's entry, or ErrNotFound (also for a key that belongs
// to another shard).
func (r *Reader) Find(key uint64) (Entry, error) {
	sh, m := r.spec.Locate(key)
	if sh != r.shard {
		return Entry{}, fmt.Errorf("sharding: key %d is in shard %d, not %d: %w", key, sh, r.shard, ErrNotFound)
	}
	es, err := r.MinishardIndex(m)
	if err != nil {
		return Entry{}, err
	}
	for _, e := range es {
		if e.Key == key {
			return e, nil
		}
	}
	return Entry{}, fmt.Errorf("sharding: key %d: %w", key, ErrNotFound)
}

// Get returns key's data, decoded.
func (r *Reader) Get(key uint64) ([]byte, error) {
	e, err := r.Find(key)
	if err != nil {
		return nil, err
	}
	return r.Data(e)
}

// Data reads and decodes the data of an entry.
func (r *Reader) Data(e Entry) ([]byte, error) {
	if e.Offset < r.spec.IndexSize() || e.Size < 0 || e.Offset > r.size || e.Size > r.size-e.Offset {
		return nil, fmt.Errorf("sharding: entry [%d, +%d) is outside the shard's data", e.Offset, e.Size)
	}
	return r.read(e.Offset, e.Size, r.spec.DataEncoding)
}

// read reads n bytes at off, which the caller checked are in the file, and
// decodes them.
func (r *Reader) read(off, n int64, enc Encoding) ([]byte, error) {
	b := make([]byte, n)
	if err := readAt(r.r, b, off); err != nil {
		return nil, fmt.Errorf("sharding: reading [%d, +%d): %w", off, n, err)
	}
	if enc != Gzip {
		return b, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, malformed(off, "gzip: %v", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, r.MaxDecoded+1))
	if err != nil {
		return nil, malformed(off, "gzip: %v", err)
	}
	if int64(len(out)) > r.MaxDecoded {
		return nil, malformed(off, "gzip inflates to more than %d bytes", r.MaxDecoded)
	}
	return out, nil
}

// readAt fills p from off; io.ReaderAt may report io.EOF with a full read at
// the end of the file, which is no error here.
func readAt(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}
