package vlen

import (
	"encoding/binary"
	"fmt"
)

// Zarrs is the zarrs "vlen" codec (names zarrs.vlen and
// https://codec.zarrs.dev/array_to_bytes/vlen): the element bytes and an
// index of n+1 offsets (Arrow-style) are encoded by independent codec
// chains and concatenated, the index first (IndexAtEnd false) or last,
// with the encoded index's length as a u64 at the very start or end.
// The chains belong to the Zarr layer, so they come in as functions that
// turn encoded bytes into raw bytes (the index as little-endian offsets).
type Zarrs struct {
	IndexAtEnd  bool
	OffsetSize  int // 4 (uint32) or 8 (uint64)
	DecodeIndex func([]byte) ([]byte, error)
	DecodeData  func([]byte) ([]byte, error)
	EncodeIndex func([]byte) ([]byte, error)
	EncodeData  func([]byte) ([]byte, error)
}

func (z Zarrs) bad(f string, a ...any) error { return &Error{"zarrs.vlen", fmt.Sprintf(f, a...)} }

// Decode splits a chunk of n elements.
func (z Zarrs) Decode(chunk []byte, n int) ([][]byte, error) {
	if z.OffsetSize != 4 && z.OffsetSize != 8 {
		return nil, z.bad("offset size %d", z.OffsetSize)
	}
	if len(chunk) < 8 {
		return nil, z.bad("chunk of %d bytes has no index length", len(chunk))
	}
	var ilen uint64
	var encIndex, encData []byte
	if z.IndexAtEnd {
		ilen = binary.LittleEndian.Uint64(chunk[len(chunk)-8:])
		if ilen > uint64(len(chunk)-8) {
			return nil, z.bad("index length %d overruns the chunk", ilen)
		}
		encData = chunk[:uint64(len(chunk)-8)-ilen]
		encIndex = chunk[uint64(len(chunk)-8)-ilen : len(chunk)-8]
	} else {
		ilen = binary.LittleEndian.Uint64(chunk)
		if ilen > uint64(len(chunk)-8) {
			return nil, z.bad("index length %d overruns the chunk", ilen)
		}
		encIndex = chunk[8 : 8+ilen]
		encData = chunk[8+ilen:]
	}
	idx, err := z.DecodeIndex(encIndex)
	if err != nil {
		return nil, z.bad("index: %v", err)
	}
	data, err := z.DecodeData(encData)
	if err != nil {
		return nil, z.bad("data: %v", err)
	}
	return splitOffsets("zarrs.vlen", idx, z.OffsetSize, data, n)
}

// Encode frames elems.
func (z Zarrs) Encode(elems [][]byte) ([]byte, error) {
	idx, data := joinOffsets(elems, z.OffsetSize)
	ei, err := z.EncodeIndex(idx)
	if err != nil {
		return nil, err
	}
	ed, err := z.EncodeData(data)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, 8+len(ei)+len(ed))
	if z.IndexAtEnd {
		out = append(append(out, ed...), ei...)
		return binary.LittleEndian.AppendUint64(out, uint64(len(ei))), nil
	}
	out = binary.LittleEndian.AppendUint64(out, uint64(len(ei)))
	return append(append(out, ei...), ed...), nil
}

// splitOffsets reads n+1 offsets of size w and slices data by them; the
// offsets must start at 0 and end at data's end (no slack).
func splitOffsets(layout string, idx []byte, w int, data []byte, n int) ([][]byte, error) {
	if len(idx) != (n+1)*w {
		return nil, &Error{layout, fmt.Sprintf("index of %d bytes, want %d offsets of %d bytes", len(idx), n+1, w)}
	}
	at := func(i int) uint64 {
		if w == 4 {
			return uint64(binary.LittleEndian.Uint32(idx[4*i:]))
		}
		return binary.LittleEndian.Uint64(idx[8*i:])
	}
	if at(0) != 0 {
		return nil, &Error{layout, fmt.Sprintf("first offset is %d, not 0", at(0))}
	}
	if at(n) != uint64(len(data)) {
		return nil, &Error{layout, fmt.Sprintf("last offset %d does not match %d data bytes", at(n), len(data))}
	}
	out := make([][]byte, n)
	prev := at(0)
	for i := 0; i < n; i++ {
		next := at(i + 1)
		if next < prev || next > uint64(len(data)) {
			return nil, &Error{layout, fmt.Sprintf("offsets decrease at element %d", i)}
		}
		out[i] = data[prev:next:next]
		prev = next
	}
	return out, nil
}

func joinOffsets(elems [][]byte, w int) (idx, data []byte) {
	idx = make([]byte, 0, (len(elems)+1)*w)
	var off uint64
	put := func(v uint64) {
		if w == 4 {
			idx = binary.LittleEndian.AppendUint32(idx, uint32(v))
		} else {
			idx = binary.LittleEndian.AppendUint64(idx, v)
		}
	}
	put(0)
	for _, e := range elems {
		data = append(data, e...)
		off += uint64(len(e))
		put(off)
	}
	return idx, data
}
