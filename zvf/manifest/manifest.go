// Package manifest decodes and encodes ZVF object manifest blobs (the
// elements of object_index/manifests; zvf-format §4.2): u32 block count,
// then per block int64 chunk coords, a mode byte and the fragments it
// names (mode 0 one fragment, mode 1 a run, mode 2 a list). Packed, no
// alignment, little-endian.
package manifest

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Modes of a block.
const (
	ModeSingle = 0 // int64 fragment
	ModeRun    = 1 // int64 start, int64 count
	ModeList   = 2 // u32 count, int64 fragments[count]
)

// Block is one manifest block.
type Block struct {
	Chunk []int64
	Mode  uint8
	// Start and Count describe modes 0 (Count 1) and 1.
	Start, Count int64
	// List holds mode 2's fragments.
	List []int64
}

// Len is the number of fragments the block names.
func (b *Block) Len() int64 {
	if b.Mode == ModeList {
		return int64(len(b.List))
	}
	return b.Count
}

// Fragment returns the i-th fragment the block names.
func (b *Block) Fragment(i int64) int64 {
	if b.Mode == ModeList {
		return b.List[i]
	}
	return b.Start + i
}

// Error is a malformed manifest.
type Error struct {
	Offset int // -1 when not about one place
	Reason string
}

func (e *Error) Error() string {
	if e.Offset < 0 {
		return "manifest: " + e.Reason
	}
	return fmt.Sprintf("manifest: %s (at byte %d)", e.Reason, e.Offset)
}

// ErrMalformed is matched by every *Error.
var ErrMalformed = errors.New("malformed manifest")

func (e *Error) Is(t error) bool { return t == ErrMalformed }

func bad(off int, f string, a ...any) error { return &Error{off, fmt.Sprintf(f, a...)} }

// Decode parses one manifest blob whose chunk keys have ndim coordinates.
// An empty blob (0 bytes) is treated as an empty manifest, like B=0.
func Decode(b []byte, ndim int) ([]Block, error) {
	if ndim < 1 || ndim > 32 {
		return nil, bad(0, "chunk key arity %d", ndim)
	}
	if len(b) == 0 {
		return nil, nil
	}
	if len(b) < 4 {
		return nil, bad(0, "%d bytes cannot hold the block count", len(b))
	}
	n := binary.LittleEndian.Uint32(b)
	minBlock := 8*ndim + 1 + 4 // the smallest block: mode 2 with no entries
	if uint64(n) > uint64(len(b)-4)/uint64(minBlock) {
		return nil, bad(0, "%d blocks cannot fit in %d bytes", n, len(b))
	}
	out := make([]Block, n)
	coords := make([]int64, int(n)*ndim)
	p := 4
	for i := range out {
		if len(b)-p < 8*ndim+1 {
			return nil, bad(p, "block %d truncated", i)
		}
		c := coords[i*ndim : (i+1)*ndim : (i+1)*ndim]
		for d := range c {
			c[d] = int64(binary.LittleEndian.Uint64(b[p:]))
			p += 8
		}
		blk := Block{Chunk: c, Mode: b[p]}
		p++
		switch blk.Mode {
		case ModeSingle:
			if len(b)-p < 8 {
				return nil, bad(p, "block %d truncated", i)
			}
			blk.Start, blk.Count = int64(binary.LittleEndian.Uint64(b[p:])), 1
			p += 8
			if blk.Start < 0 {
				return nil, bad(p-8, "block %d: negative fragment %d", i, blk.Start)
			}
		case ModeRun:
			if len(b)-p < 16 {
				return nil, bad(p, "block %d truncated", i)
			}
			blk.Start = int64(binary.LittleEndian.Uint64(b[p:]))
			blk.Count = int64(binary.LittleEndian.Uint64(b[p+8:]))
			p += 16
			if blk.Start < 0 || blk.Count < 0 || blk.Start > 1<<62-blk.Count {
				return nil, bad(p-16, "block %d: bad run (%d, %d)", i, blk.Start, blk.Count)
			}
		case ModeList:
			if len(b)-p < 4 {
				return nil, bad(p, "block %d truncated", i)
			}
			cnt := binary.LittleEndian.Uint32(b[p:])
			p += 4
			if uint64(cnt) > uint64(len(b)-p)/8 {
				return nil, bad(p-4, "block %d: %d fragments cannot fit", i, cnt)
			}
			blk.List = make([]int64, cnt)
			for j := range blk.List {
				v := int64(binary.LittleEndian.Uint64(b[p:]))
				if v < 0 {
					return nil, bad(p, "block %d: negative fragment %d", i, v)
				}
				blk.List[j] = v
				p += 8
			}
		default:
			return nil, bad(p-1, "block %d: unknown mode %d", i, blk.Mode)
		}
		out[i] = blk
	}
	if p != len(b) {
		return nil, bad(p, "%d trailing bytes", len(b)-p)
	}
	return out, nil
}

// Encode renders blocks; every block's Chunk must have ndim coordinates.
func Encode(blocks []Block, ndim int) ([]byte, error) {
	out := binary.LittleEndian.AppendUint32(nil, uint32(len(blocks)))
	for i, b := range blocks {
		if len(b.Chunk) != ndim {
			return nil, fmt.Errorf("manifest: block %d has %d coords, want %d", i, len(b.Chunk), ndim)
		}
		for _, c := range b.Chunk {
			out = binary.LittleEndian.AppendUint64(out, uint64(c))
		}
		out = append(out, b.Mode)
		switch b.Mode {
		case ModeSingle:
			if b.Start < 0 {
				return nil, fmt.Errorf("manifest: block %d: negative fragment", i)
			}
			out = binary.LittleEndian.AppendUint64(out, uint64(b.Start))
		case ModeRun:
			if b.Start < 0 || b.Count < 0 {
				return nil, fmt.Errorf("manifest: block %d: negative run", i)
			}
			out = binary.LittleEndian.AppendUint64(out, uint64(b.Start))
			out = binary.LittleEndian.AppendUint64(out, uint64(b.Count))
		case ModeList:
			out = binary.LittleEndian.AppendUint32(out, uint32(len(b.List)))
			for _, v := range b.List {
				if v < 0 {
					return nil, fmt.Errorf("manifest: block %d: negative fragment", i)
				}
				out = binary.LittleEndian.AppendUint64(out, uint64(v))
			}
		default:
			return nil, fmt.Errorf("manifest: block %d: unknown mode %d", i, b.Mode)
		}
	}
	return out, nil
}

// Ref is one (chunk, fragment) reference in manifest order.
type Ref struct {
	Chunk    []int64
	Fragment int64
}

// Refs expands blocks into their ordered fragment references, at most max
// of them: a run's count is a header field, so the expansion is bounded by
// the caller, not by the counts.
func Refs(blocks []Block, max int64) ([]Ref, error) {
	var n int64
	for i := range blocks {
		if l := blocks[i].Len(); l > max-n {
			return nil, bad(-1, "more than %d fragment references (block %d)", max, i)
		}
		n += blocks[i].Len()
	}
	out := make([]Ref, 0, n)
	for i := range blocks {
		b := &blocks[i]
		for j := int64(0); j < b.Len(); j++ {
			out = append(out, Ref{Chunk: b.Chunk, Fragment: b.Fragment(j)})
		}
	}
	return out, nil
}
