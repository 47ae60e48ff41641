package vlen

import (
	"fmt"
	"unicode/utf8"
)

// ZEP is the chunk layout of the draft ZEP for string and binary data
// types (Arrow-style): n+1 offsets (int32, or int64 for the Large types),
// then the data buffer starting at the next multiple of 64 bytes.
type ZEP struct {
	Large bool // int64 offsets
	UTF8  bool // string: elements must be valid UTF-8
}

func (z ZEP) width() int {
	if z.Large {
		return 8
	}
	return 4
}

// Decode splits a chunk of n elements (aliasing chunk).
func (z ZEP) Decode(chunk []byte, n int) ([][]byte, error) {
	w := z.width()
	if n < 0 || uint64(n+1)*uint64(w) > uint64(len(chunk)) {
		return nil, &Error{"zep", fmt.Sprintf("%d offsets cannot fit in %d bytes", n+1, len(chunk))}
	}
	end := (n + 1) * w
	start := (end + 63) / 64 * 64
	if start > len(chunk) {
		start = len(chunk)
	}
	for _, b := range chunk[end:start] {
		if b != 0 {
			return nil, &Error{"zep", "nonzero padding before the data buffer"}
		}
	}
	// Offsets must start at 0 and end at the buffer's end: a chunk is one
	// element run with no slack, so trailing bytes mean a wrong count.
	elems, err := splitOffsets("zep", chunk[:end], w, chunk[start:], n, true)
	if err != nil {
		return nil, err
	}
	if z.UTF8 {
		for i, e := range elems {
			if !utf8.Valid(e) {
				return nil, &Error{"zep", fmt.Sprintf("element %d is not valid UTF-8", i)}
			}
		}
	}
	return elems, nil
}

// Encode lays elems out as offsets, zero padding to 64 bytes, data.
func (z ZEP) Encode(elems [][]byte) ([]byte, error) {
	w := z.width()
	idx, data := joinOffsets(elems, w)
	if !z.Large && len(data) > 1<<31-1 {
		return nil, &Error{"zep", "data exceeds int32 offsets; use the Large layout"}
	}
	start := (len(idx) + 63) / 64 * 64
	out := make([]byte, start, start+len(data))
	copy(out, idx)
	return append(out, data...), nil
}
