package writer

import "encoding/binary"

// Byte layouts of the ZVF payloads the writer emits (zvf-format.md §3, §4,
// §5.3). Only the shapes 0.7 writers produce are needed: range-only
// fragment indexes, mode-0 manifest blocks and single-group ragged blobs.

const fragmentIndexMagic = 0x5A564647 // bytes "GFVZ" on disk

// appendRangeFragments appends a fragment-index v1 blob whose fragments are
// ranges tiling the rows in order (fragment f = counts[f] rows).
func appendRangeFragments(dst []byte, counts []int64) []byte {
	f := len(counts)
	dst = binary.LittleEndian.AppendUint32(dst, fragmentIndexMagic)
	dst = binary.LittleEndian.AppendUint16(dst, 1) // version
	dst = binary.LittleEndian.AppendUint16(dst, 0) // flags
	dst = binary.LittleEndian.AppendUint32(dst, uint32(f))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(f)) // every fragment is a range
	if f == 0 {
		return dst // header-only blob, no explicit offsets
	}
	bitmapLen := ((f+7)/8 + 7) &^ 7
	bm := len(dst)
	dst = append(dst, make([]byte, bitmapLen)...)
	for i := range f {
		dst[bm+i>>3] |= 1 << (i & 7)
	}
	var start int64
	for _, n := range counts {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(start))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(n))
		start += n
	}
	return binary.LittleEndian.AppendUint32(dst, 0) // explicit_offsets[0]
}

// rangeFragmentsSize is the exact length appendRangeFragments produces.
func rangeFragmentsSize(f int) int {
	if f == 0 {
		return 16
	}
	return 16 + ((f+7)/8+7)&^7 + 16*f + 4
}

// appendManifest appends one object's manifest: mode-0 blocks naming
// (chunk coords, fragment) pairs.
func appendManifest(dst []byte, d int, refs []blockRef) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(refs)))
	for _, r := range refs {
		for i := range d {
			dst = binary.LittleEndian.AppendUint64(dst, uint64(r.c[i]))
		}
		dst = append(dst, 0) // mode 0: one fragment
		dst = binary.LittleEndian.AppendUint64(dst, uint64(r.frag))
	}
	return dst
}

// blockRef is one manifest block: a fragment of a chunk.
type blockRef struct {
	c    coords
	frag int64
}

// appendVlenBytes frames items as the vlen-bytes codec does: u32 count,
// then u32 length + bytes per item.
func appendVlenBytes(dst []byte, items [][]byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(items)))
	for _, it := range items {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(it)))
		dst = append(dst, it...)
	}
	return dst
}

// appendRaggedPairs appends the inline ragged blob used by cross-level
// links: int64 K=1, int64 offset 0, then int64 (src,dst) rows.
func appendRaggedPairs(dst []byte, pairs []int64) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, 1)
	dst = binary.LittleEndian.AppendUint64(dst, 0)
	return appendInt64s(dst, pairs)
}

func appendInt64s(dst []byte, v []int64) []byte {
	for _, x := range v {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(x))
	}
	return dst
}
