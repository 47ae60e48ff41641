package writer

import (
	"encoding/binary"

	"github.com/zvfserve/zvfserve/fragindex"
	"github.com/zvfserve/zvfserve/zvf/manifest"
)

// Payload byte layouts come from the leaf packages (fragindex, manifest,
// ragged, vlen); these helpers adapt the writer's layout types to them.
// 0.7 writers emit only range fragments and mode-0 manifest blocks.

// rangeFragments encodes a fragment index whose fragments are ranges tiling
// the rows in order (fragment f = counts[f] rows).
func rangeFragments(counts []int64) ([]byte, error) {
	frags := make([]fragindex.Fragment, len(counts))
	var start int64
	for f, n := range counts {
		frags[f] = fragindex.RangeFragment(start, n)
		start += n
	}
	return fragindex.Encode(frags)
}

// blockRef is one manifest block: a fragment of a chunk.
type blockRef struct {
	c    coords
	frag int64
}

// manifestBlob encodes one object's manifest as mode-0 blocks.
func manifestBlob(d int, refs []blockRef) ([]byte, error) {
	blocks := make([]manifest.Block, len(refs))
	for i, r := range refs {
		blocks[i] = manifest.Block{Chunk: r.c[:d:d], Mode: manifest.ModeSingle, Start: r.frag, Count: 1}
	}
	return manifest.Encode(blocks, d)
}

func appendInt64s(dst []byte, v []int64) []byte {
	for _, x := range v {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(x))
	}
	return dst
}
