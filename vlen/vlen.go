// Package vlen decodes and encodes the chunk layouts of Zarr's
// variable-length data types: the numcodecs-style vlen-bytes / vlen-utf8
// framing (VlenBytes). Every layout implements Layout, so the Zarr codec
// pipeline treats them alike.
package vlen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Layout is one variable-length chunk layout. Decode checks that the chunk
// holds exactly n elements; elements may alias chunk.
type Layout interface {
	Decode(chunk []byte, n int) ([][]byte, error)
	Encode(elems [][]byte) ([]byte, error)
}

// Error reports a malformed chunk.
type Error struct {
	Layout string
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("vlen %s: %s", e.Layout, e.Reason) }

// ErrMalformed is matched (errors.Is) by every *Error.
var ErrMalformed = errors.New("malformed variable-length chunk")

func (e *Error) Is(target error) bool { return target == ErrMalformed }

// VlenBytes is the numcodecs framing used by the Zarr v3 codecs "vlen-bytes"
// and "vlen-utf8": u32 LE count, then per element u32 LE length + bytes.
// UTF8 makes Decode reject invalid UTF-8.
type VlenBytes struct {
	UTF8 bool
}

func (v VlenBytes) name() string {
	if v.UTF8 {
		return "vlen-utf8"
	}
	return "vlen-bytes"
}

// Decode splits chunk into n elements that alias chunk.
func (v VlenBytes) Decode(chunk []byte, n int) ([][]byte, error) {
	if len(chunk) < 4 {
		return nil, &Error{v.name(), fmt.Sprintf("chunk of %d bytes has no count", len(chunk))}
	}
	count := binary.LittleEndian.Uint32(chunk)
	if int64(count) != int64(n) {
		return nil, &Error{v.name(), fmt.Sprintf("chunk holds %d elements, want %d", count, n)}
	}
	// Each element needs at least its 4-byte length, so a count larger than
	// that bound is a lie; checking it before allocating keeps a hostile
	// header from sizing the slice.
	if int64(count) > int64(len(chunk)-4)/4 {
		return nil, &Error{v.name(), fmt.Sprintf("count %d cannot fit in %d bytes", count, len(chunk))}
	}
	out := make([][]byte, count)
	p := 4
	for i := range out {
		if len(chunk)-p < 4 {
			return nil, &Error{v.name(), fmt.Sprintf("element %d: truncated length", i)}
		}
		l := binary.LittleEndian.Uint32(chunk[p:])
		p += 4
		if uint64(l) > uint64(len(chunk)-p) {
			return nil, &Error{v.name(), fmt.Sprintf("element %d: length %d overruns chunk", i, l)}
		}
		e := chunk[p : p+int(l) : p+int(l)]
		if v.UTF8 && !utf8.Valid(e) {
			return nil, &Error{v.name(), fmt.Sprintf("element %d is not valid UTF-8", i)}
		}
		out[i] = e
		p += int(l)
	}
	if p != len(chunk) {
		return nil, &Error{v.name(), fmt.Sprintf("%d trailing bytes", len(chunk)-p)}
	}
	return out, nil
}

// Encode frames elems.
func (v VlenBytes) Encode(elems [][]byte) ([]byte, error) {
	size := 4
	for i, e := range elems {
		if uint64(len(e)) > 1<<32-1 {
			return nil, &Error{v.name(), fmt.Sprintf("element %d longer than 4 GiB", i)}
		}
		if v.UTF8 && !utf8.Valid(e) {
			return nil, &Error{v.name(), fmt.Sprintf("element %d is not valid UTF-8", i)}
		}
		size += 4 + len(e)
	}
	out := make([]byte, 4, size)
	binary.LittleEndian.PutUint32(out, uint32(len(elems)))
	for _, e := range elems {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(e)))
		out = append(out, e...)
	}
	return out, nil
}
