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
	f int
	// words[2w] is bitmap word w (LSB-first) and words[2w+1] the set bits
	// in words [0, w): a lookup reads both from one cache line.
	words   []int64
	ranges  []byte  // R × (int64 start, int64 count), a view of the blob
	offsets []byte  // E+1 uint32, a view of the blob
	indices []int64 // T; shares one allocation with words
}

// Decode parses b; the Index keeps a view of b, so b must not be modified
// afterwards. rows is the number of rows in the chunk payload the
// fragments index into; pass -1 to skip the bounds checks.
//
// The validation loops fold each table into an accumulator (an OR of sign
// bits, a running maximum) instead of branching per entry, and only on
// failure rescan to say where: this keeps Decode of a large index near
// memory speed.
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
	// ceil(ceil(F/8) bytes to 8) is ceil(F/64) words: the padding bytes are
	// the high bytes of the last word, so checking its bits past F covers
	// both padding rules.
	nw := (F + 63) / 64
	bmPadded := 8 * nw
	E := F - R
	// Fixed-size part, computed in uint64 from 32-bit fields: cannot overflow.
	fixed := headerSize + bmPadded + 16*R + 4*(E+1)
	if uint64(len(b)) < fixed {
		return nil, bad(len(b), "blob of %d bytes is shorter than the %d bytes F=%d R=%d need", len(b), fixed, F, R)
	}
	bm := b[headerSize : headerSize+bmPadded : headerSize+bmPadded]
	if rem := F % 64; rem != 0 && binary.LittleEndian.Uint64(bm[bmPadded-8:])>>rem != 0 {
		return nil, bad(headerSize, "bitmap has set bits past F=%d", F)
	}
	pr := headerSize + bmPadded // range table
	po := pr + 16*R             // CSR offsets
	pi := po + 4*(E+1)          // CSR indices
	// The range table and the offsets stay views of b: decoding the ranges
	// into a slice would double the cost of Decode for the common all-range
	// index.
	ranges := b[pr:po:po]
	offsets := b[po:pi:pi]
	T := uint64(binary.LittleEndian.Uint32(offsets[4*E:]))
	if uint64(len(b))-pi != 8*T {
		return nil, bad(int(pi), "%d bytes remain for %d explicit indices (want %d)", uint64(len(b))-pi, T, 8*T)
	}

	// Every size is now bounded by len(b): one allocation holds the bitmap
	// with its prefix popcount and the decoded indices (an []int64 cannot
	// be a view of the bytes). Filling the words also counts the bits.
	buf := make([]int64, 2*nw+T)
	words := buf[: 2*nw : 2*nw]
	run := int64(0)
	for ws, rest := words, bm; len(ws) >= 2 && len(rest) >= 8; ws, rest = ws[2:], rest[8:] {
		v := binary.LittleEndian.Uint64(rest)
		ws[0], ws[1] = int64(v), run
		run += int64(bits.OnesCount64(v))
	}
	if uint64(run) != R {
		return nil, bad(12, "R=%d but the bitmap has %d set bits", R, run)
	}

	// Without a row count the limit is the largest int64.
	lim := uint64(rows)
	if rows < 0 {
		lim = 1<<63 - 1
	}
	if sign, end := rangeScan(ranges); sign>>63 != 0 || end > lim {
		return nil, rangeError(ranges, int(pr), lim, rows)
	}

	if o := binary.LittleEndian.Uint32(offsets); o != 0 {
		return nil, bad(int(po), "explicit_offsets[0]=%d, want 0", o)
	}
	if offsetScan(offsets) < 0 {
		return nil, offsetsError(offsets, int(po))
	}

	dst := buf[2*nw:]
	// An index is valid iff it is below rows, or below 2^63 without a row
	// count: so the largest one decides.
	ilim := uint64(rows)
	if rows < 0 {
		ilim = 1 << 63
	}
	if top := copyIndices(dst, b[pi:]); T > 0 && top >= ilim {
		for i, v := range dst {
			if uint64(v) >= ilim {
				return nil, bad(int(pi)+8*i, "explicit index %d outside [0, %d)", v, rows)
			}
		}
	}
	return &Index{f: int(F), words: words, ranges: ranges, offsets: offsets, indices: dst}, nil
}

// The scans below are separate, non-inlined functions so that their
// accumulators stay in registers: inside Decode they were spilled to the
// stack every iteration.

// rangeScan returns the OR of every start and count (its top bit is set iff
// one is negative) and the largest start+count. With start and count below
// 2^63 their sum cannot wrap, and start+count <= lim implies start <= lim:
// so the two results validate the whole table.
//
//go:noinline
func rangeScan(rg []byte) (sign, end uint64) {
	// Two ranges a step, with independent maxima to halve the dependency
	// chain; i < len-31 lets the compiler drop the bounds checks.
	var end1 uint64
	i := 0
	for ; i < len(rg)-31; i += 32 {
		s0, c0 := binary.LittleEndian.Uint64(rg[i:]), binary.LittleEndian.Uint64(rg[i+8:])
		s1, c1 := binary.LittleEndian.Uint64(rg[i+16:]), binary.LittleEndian.Uint64(rg[i+24:])
		sign |= s0 | c0 | s1 | c1
		end = max(end, s0+c0)
		end1 = max(end1, s1+c1)
	}
	if i < len(rg)-15 {
		s0, c0 := binary.LittleEndian.Uint64(rg[i:]), binary.LittleEndian.Uint64(rg[i+8:])
		sign |= s0 | c0
		end = max(end, s0+c0)
	}
	return sign, max(end, end1)
}

// offsetScan returns a negative number iff some offset is below its
// predecessor: the OR keeps the sign bit of every difference.
//
//go:noinline
func offsetScan(o []byte) (dec int64) {
	var last int64
	for ; len(o) >= 16; o = o[16:] {
		v0 := int64(binary.LittleEndian.Uint32(o[0:4]))
		v1 := int64(binary.LittleEndian.Uint32(o[4:8]))
		v2 := int64(binary.LittleEndian.Uint32(o[8:12]))
		v3 := int64(binary.LittleEndian.Uint32(o[12:16]))
		dec |= (v0 - last) | (v1 - v0) | (v2 - v1) | (v3 - v2)
		last = v3
	}
	for ; len(o) >= 4; o = o[4:] {
		v := int64(binary.LittleEndian.Uint32(o))
		dec |= v - last
		last = v
	}
	return dec
}

// copyIndices decodes src into dst and returns the largest index as a
// uint64 (a negative one is above 2^63). Four a step with independent
// maxima; the length conditions let the compiler drop the bounds checks.
//
//go:noinline
func copyIndices(dst []int64, src []byte) (top uint64) {
	var t1, t2, t3 uint64
	for len(dst) >= 4 && len(src) >= 32 {
		v0 := binary.LittleEndian.Uint64(src[0:8])
		v1 := binary.LittleEndian.Uint64(src[8:16])
		v2 := binary.LittleEndian.Uint64(src[16:24])
		v3 := binary.LittleEndian.Uint64(src[24:32])
		dst[0], dst[1], dst[2], dst[3] = int64(v0), int64(v1), int64(v2), int64(v3)
		top, t1, t2, t3 = max(top, v0), max(t1, v1), max(t2, v2), max(t3, v3)
		dst, src = dst[4:], src[32:]
	}
	for len(dst) >= 1 && len(src) >= 8 {
		v := binary.LittleEndian.Uint64(src)
		dst[0] = int64(v)
		top = max(top, v)
		dst, src = dst[1:], src[8:]
	}
	return max(top, t1, t2, t3)
}

// rangeError locates the first invalid range; Decode knows one exists.
func rangeError(ranges []byte, at int, lim uint64, rows int64) error {
	for r := 0; len(ranges) >= 16; ranges, r = ranges[16:], r+1 {
		start, count := binary.LittleEndian.Uint64(ranges), binary.LittleEndian.Uint64(ranges[8:])
		if int64(start) < 0 || int64(count) < 0 {
			return bad(at+16*r, "range %d has negative start or count (%d, %d)", r, int64(start), int64(count))
		}
		if start > lim || count > lim-start {
			return bad(at+16*r, "range %d [%d, %d+%d) exceeds %d rows", r, start, start, count, rows)
		}
	}
	return bad(at, "invalid range table")
}

// offsetsError locates the first decrease of the CSR offsets.
func offsetsError(offsets []byte, at int) error {
	for i := 1; 4*i+4 <= len(offsets); i++ {
		if binary.LittleEndian.Uint32(offsets[4*i:]) < binary.LittleEndian.Uint32(offsets[4*i-4:]) {
			return bad(at+4*i, "explicit_offsets not monotone at %d", i)
		}
	}
	return bad(at, "explicit_offsets not monotone")
}

func (x *Index) offset(e int) uint32 { return binary.LittleEndian.Uint32(x.offsets[4*e:]) }

// Len is the number of fragments F.
func (x *Index) Len() int { return x.f }

// NumRanges is R.
func (x *Index) NumRanges() int { return len(x.ranges) / 16 }

// IsRange reports whether fragment f is a range. f must be in [0, Len()).
func (x *Index) IsRange(f int) bool { return uint64(x.words[2*(f>>6)])>>(f&63)&1 == 1 }

// upTo returns fragment f's bitmap word shifted so that bit f is the top
// bit and the bits above it are gone, and the number of range fragments
// before that word: f is a range iff the result is negative as an int64,
// and the range fragments in [0, f] number n + popcount.
func (x *Index) upTo(f int) (top uint64, n int) {
	w := 2 * (f >> 6)
	return uint64(x.words[w]) << (^f & 63), int(x.words[w+1])
}

// Range returns fragment f's rows [start, start+count). ok is false when f
// is explicit.
func (x *Index) Range(f int) (start, count int64, ok bool) {
	t, n := x.upTo(f)
	if int64(t) >= 0 {
		return 0, 0, false
	}
	rg := x.ranges[16*(n+bits.OnesCount64(t)-1):]
	return int64(binary.LittleEndian.Uint64(rg)), int64(binary.LittleEndian.Uint64(rg[8:])), true
}

// Indices returns fragment f's explicit row indices (a view; do not
// modify), or nil for a range fragment.
func (x *Index) Indices(f int) []int64 {
	t, n := x.upTo(f)
	if int64(t) < 0 {
		return nil
	}
	e := f - n - bits.OnesCount64(t)
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
	return int64(96 + 8*len(x.words) + len(x.ranges) + len(x.offsets) + 8*len(x.indices))
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
