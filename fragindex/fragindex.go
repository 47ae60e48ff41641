// Package fragindex decodes and encodes ZVF fragment-index v1 blobs
// (vertex_fragments/<chunk> and link_fragments/<chunk>): a header, a range
// bitmap padded to 8 bytes, a (start, count) table for range fragments and a
// CSR list of row indices for explicit fragments. Decode validates every
// write-time invariant of the spec and computes a per-word prefix popcount
// once, so IsRange, Range and Indices are O(1) and allocation-free.
//
// On disk the magic is the uint32 LE 0x5A564647: bytes "GFVZ".
package fragindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// Magic is the little-endian uint32 at offset 0.
const Magic = 0x5A564647

const headerSize = 16

// Error describes a malformed blob.
type Error struct {
	Offset int // byte offset the problem was found at (-1 when global)
	Reason string
}

func (e *Error) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("fragment index: %s (at byte %d)", e.Reason, e.Offset)
	}
	return "fragment index: " + e.Reason
}

// ErrMalformed is matched by every *Error (errors.Is).
var ErrMalformed = errors.New("malformed fragment index")

func (e *Error) Is(t error) bool { return t == ErrMalformed }

func bad(off int, format string, a ...any) error {
	return &Error{Offset: off, Reason: fmt.Sprintf(format, a...)}
}

// Index is a decoded fragment index.
type Index struct {
	f       int
	bitmap  []uint64 // ceil(F/64) words, LSB-first
	prefix  []uint32 // prefix[w] = set bits in words [0, w)
	ranges  []byte   // R × (int64 start, int64 count), a view of the blob
	offsets []byte   // E+1 uint32, a view of the blob
	indices []int64  // T
}

// Decode parses b; the Index keeps a view of b, so b must not be modified
// afterwards. rows is the number of rows in the chunk payload the
// fragments index into; pass -1 to skip the bounds checks.
func Decode(b []byte, rows int64) (*Index, error) {
	if len(b) < headerSize {
		return nil, bad(0, "%d bytes cannot hold the 16-byte header", len(b))
	}
	if m := binary.LittleEndian.Uint32(b); m != Magic {
		return nil, bad(0, "magic %#08x, want %#08x", m, Magic)
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != 1 {
		return nil, bad(4, "version %d, want 1", v)
	}
	if fl := binary.LittleEndian.Uint16(b[6:]); fl != 0 {
		return nil, bad(6, "flags %#x, want 0", fl)
	}
	F := uint64(binary.LittleEndian.Uint32(b[8:]))
	R := uint64(binary.LittleEndian.Uint32(b[12:]))
	if R > F {
		return nil, bad(12, "R=%d exceeds F=%d", R, F)
	}
	if F == 0 {
		if len(b) != headerSize {
			return nil, bad(headerSize, "F=0 but blob has %d bytes", len(b))
		}
		return &Index{}, nil
	}
	bmBytes := (F + 7) / 8
	bmPadded := (bmBytes + 7) &^ 7
	E := F - R
	// Fixed-size part, computed in uint64 from 32-bit fields: cannot overflow.
	fixed := headerSize + bmPadded + 16*R + 4*(E+1)
	if uint64(len(b)) < fixed {
		return nil, bad(len(b), "blob of %d bytes is shorter than the %d bytes F=%d R=%d need", len(b), fixed, F, R)
	}
	x := &Index{f: int(F)}
	nw := (F + 63) / 64
	x.bitmap = make([]uint64, nw)
	x.prefix = make([]uint32, nw+1)
	bm := b[headerSize : headerSize+bmPadded]
	for w := range x.bitmap {
		x.bitmap[w] = binary.LittleEndian.Uint64(bm[8*w:]) // bmPadded is a multiple of 8
	}
	// Padding bits and bytes past F must be zero.
	if rem := F % 64; rem != 0 && x.bitmap[nw-1]>>rem != 0 {
		return nil, bad(headerSize, "bitmap has set bits past F=%d", F)
	}
	for i := (F + 63) / 64 * 8; i < bmPadded; i++ {
		if bm[i] != 0 {
			return nil, bad(headerSize+int(i), "nonzero bitmap padding")
		}
	}
	for w, v := range x.bitmap {
		x.prefix[w+1] = x.prefix[w] + uint32(bits.OnesCount64(v))
	}
	if uint64(x.prefix[nw]) != R {
		return nil, bad(12, "R=%d but the bitmap has %d set bits", R, x.prefix[nw])
	}
	p := headerSize + bmPadded
	// The range table stays a view of b: decoding it into a slice would
	// double the cost of Decode for the common all-range index.
	x.ranges = b[p : p+16*R : p+16*R]
	// One unsigned comparison per field covers both "negative" and "past
	// the rows" (a negative int64 is a huge uint64); without a row count
	// the limit is the largest int64.
	lim := uint64(rows)
	if rows < 0 {
		lim = 1<<63 - 1
	}
	for rg, r := x.ranges, 0; len(rg) >= 16; rg, r = rg[16:], r+1 {
		start, count := binary.LittleEndian.Uint64(rg), binary.LittleEndian.Uint64(rg[8:])
		if start > lim || count > lim-start {
			at := int(p) + 16*r
			if int64(start) < 0 || int64(count) < 0 {
				return nil, bad(at, "range %d has negative start or count (%d, %d)", r, int64(start), int64(count))
			}
			return nil, bad(at, "range %d [%d, %d+%d) exceeds %d rows", r, start, start, count, rows)
		}
	}
	p += 16 * R
	x.offsets = b[p : p+4*(E+1) : p+4*(E+1)]
	if x.offset(0) != 0 {
		return nil, bad(int(p), "explicit_offsets[0]=%d, want 0", x.offset(0))
	}
	for i := 1; i <= int(E); i++ {
		if x.offset(i) < x.offset(i-1) {
			return nil, bad(int(p)+4*i, "explicit_offsets not monotone at %d", i)
		}
	}
	p += 4 * (E + 1)
	T := uint64(x.offset(int(E)))
	if uint64(len(b))-p != 8*T {
		return nil, bad(int(p), "%d bytes remain for %d explicit indices (want %d)", uint64(len(b))-p, T, 8*T)
	}
	x.indices = make([]int64, T)
	src := b[p:]
	for i := range x.indices {
		v := binary.LittleEndian.Uint64(src[8*i:])
		if v >= lim && (rows >= 0 || int64(v) < 0) { // v < rows, or v ≥ 0 without a row count
			return nil, bad(int(p)+8*i, "explicit index %d outside [0, %d)", int64(v), rows)
		}
		x.indices[i] = int64(v)
	}
	return x, nil
}

func (x *Index) offset(e int) uint32 { return binary.LittleEndian.Uint32(x.offsets[4*e:]) }

// Len is the number of fragments F.
func (x *Index) Len() int { return x.f }

// NumRanges is R.
func (x *Index) NumRanges() int { return len(x.ranges) / 16 }

// IsRange reports whether fragment f is a range. f must be in [0, Len()).
func (x *Index) IsRange(f int) bool { return x.bitmap[f>>6]>>(f&63)&1 == 1 }

// rank is the number of range fragments before f.
func (x *Index) rank(f int) int {
	w := f >> 6
	return int(x.prefix[w]) + bits.OnesCount64(x.bitmap[w]&(1<<(f&63)-1))
}

// Range returns fragment f's rows [start, start+count). ok is false when f
// is explicit.
func (x *Index) Range(f int) (start, count int64, ok bool) {
	if !x.IsRange(f) {
		return 0, 0, false
	}
	r := x.rank(f) * 16
	return int64(binary.LittleEndian.Uint64(x.ranges[r:])), int64(binary.LittleEndian.Uint64(x.ranges[r+8:])), true
}

// Indices returns fragment f's explicit row indices (a view; do not
// modify), or nil for a range fragment.
func (x *Index) Indices(f int) []int64 {
	if x.IsRange(f) {
		return nil
	}
	e := f - x.rank(f)
	a, z := x.offset(e), x.offset(e+1)
	return x.indices[a:z:z]
}

// Count is the number of rows fragment f names.
func (x *Index) Count(f int) int64 {
	if _, c, ok := x.Range(f); ok {
		return c
	}
	return int64(len(x.Indices(f)))
}

// AppendRows appends fragment f's row indices to dst.
func (x *Index) AppendRows(dst []int64, f int) []int64 {
	if s, c, ok := x.Range(f); ok {
		for r := s; r < s+c; r++ {
			dst = append(dst, r)
		}
		return dst
	}
	return append(dst, x.Indices(f)...)
}

// SizeBytes approximates the decoded index's memory, for cache budgets.
func (x *Index) SizeBytes() int64 {
	return int64(96 + 8*len(x.bitmap) + 4*len(x.prefix) + len(x.ranges) + len(x.offsets) + 8*len(x.indices))
}

// Fragment is one fragment to encode: a range (Indices == nil) or an
// explicit list of rows.
type Fragment struct {
	Start, Count int64
	Indices      []int64
	Explicit     bool
}

// RangeFragment and ExplicitFragment build fragments for Encode.
func RangeFragment(start, count int64) Fragment { return Fragment{Start: start, Count: count} }

// ExplicitFragment lists rows.
func ExplicitFragment(rows []int64) Fragment { return Fragment{Indices: rows, Explicit: true} }

// Encode renders frags as a v1 blob.
func Encode(frags []Fragment) ([]byte, error) {
	F := len(frags)
	if uint64(F) > 1<<32-1 {
		return nil, bad(-1, "%d fragments exceed uint32", F)
	}
	if F == 0 {
		out := make([]byte, headerSize)
		binary.LittleEndian.PutUint32(out, Magic)
		binary.LittleEndian.PutUint16(out[4:], 1)
		return out, nil
	}
	var R, T int
	for i, fr := range frags {
		if fr.Explicit {
			T += len(fr.Indices)
			for _, v := range fr.Indices {
				if v < 0 {
					return nil, bad(-1, "fragment %d has negative index %d", i, v)
				}
			}
		} else {
			if fr.Start < 0 || fr.Count < 0 {
				return nil, bad(-1, "fragment %d has negative start or count", i)
			}
			R++
		}
	}
	if uint64(T) > 1<<32-1 {
		return nil, bad(-1, "%d explicit indices exceed uint32", T)
	}
	E := F - R
	bmPadded := ((F+7)/8 + 7) &^ 7
	out := make([]byte, headerSize+bmPadded, headerSize+bmPadded+16*R+4*(E+1)+8*T)
	binary.LittleEndian.PutUint32(out, Magic)
	binary.LittleEndian.PutUint16(out[4:], 1)
	binary.LittleEndian.PutUint32(out[8:], uint32(F))
	binary.LittleEndian.PutUint32(out[12:], uint32(R))
	for i, fr := range frags {
		if !fr.Explicit {
			out[headerSize+i/8] |= 1 << (i % 8)
			out = binary.LittleEndian.AppendUint64(out, uint64(fr.Start))
			out = binary.LittleEndian.AppendUint64(out, uint64(fr.Count))
		}
	}
	off := uint32(0)
	out = binary.LittleEndian.AppendUint32(out, 0)
	for _, fr := range frags {
		if fr.Explicit {
			off += uint32(len(fr.Indices))
			out = binary.LittleEndian.AppendUint32(out, off)
		}
	}
	for _, fr := range frags {
		for _, v := range fr.Indices {
			out = binary.LittleEndian.AppendUint64(out, uint64(v))
		}
	}
	return out, nil
}

// Fragments returns the decoded index as Fragments (for re-encoding).
func (x *Index) Fragments() []Fragment {
	out := make([]Fragment, x.f)
	for f := range out {
		if s, c, ok := x.Range(f); ok {
			out[f] = RangeFragment(s, c)
		} else {
			out[f] = ExplicitFragment(x.Indices(f))
		}
	}
	return out
}
