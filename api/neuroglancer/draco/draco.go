// Package draco encodes triangle meshes with integer vertex positions as
// Draco bitstreams, the fragment format of Neuroglancer's
// neuroglancer_multilod_draco meshes. It is an encoder only, written from the
// Draco bitstream specification (https://google.github.io/draco/spec/) and
// checked against Draco's own decoders in the tests (draco_decoder, npm
// draco3d and Neuroglancer's fragment decoder); it imports nothing of the
// project.
//
// Use: fill a Mesh with integer positions on the fragment's grid and its
// faces, and call Encoder.Append with a buffer to append to; keep one
// Encoder per goroutine (or in a sync.Pool) so its scratch memory is reused,
// after which encoding allocates nothing beyond growing dst. A mesh that
// breaks the contract below is an *InputError (errors.Is ErrInvalidMesh),
// never a panic.
//
// What it writes (bitstream version 2.2, the current mesh version):
//
//   - header: "DRACO", major 2, minor 2, encoder type 1 (triangular mesh),
//     method 0 (sequential connectivity, no edgebreaker), flags 0 (no
//     metadata);
//   - connectivity: varint face and point counts, then the 3·F vertex indices
//     entropy coded (method 0: each index as the signed difference from the
//     previous one, magnitude<<1 | sign);
//   - one attribute: POSITION, DT_INT32, 3 components, not normalized,
//     unique id 0, through the sequential integer attribute coder with the
//     difference prediction (each vertex predicted by the previous one, the
//     first by the lower bound) and the wrap transform (corrections folded
//     into half the value range), entropy coded. Draco's quantization is not
//     used: the decoder gives back exactly the integers given here.
//
// Entropy coding is Draco's symbol coding: rANS over a per-stream frequency
// table ("raw" symbols, for values up to 18 bits) or rANS over bit lengths
// followed by the bits themselves ("tagged"), whichever the encoder
// estimates smaller.
//
// Order is kept exactly: the decoder gives back the vertices in the order
// given (point i is vertex i; unreferenced vertices are kept too) and the
// faces in the order given with each face's corners in the order given, so
// winding is kept; degenerate triangles are kept.
//
// Which decoders: Neuroglancer decodes fragments with Draco 1.4.1 compiled
// to WebAssembly, Debian ships 1.5.5, npm draco3d is 1.5.7. Decoders before
// 1.5.7 refuse a sequential mesh with more vertices than 3 per face, so the
// encoder refuses such a mesh too (a fragment built from its faces never
// has one).
//
// Neuroglancer's multilod contract, which this package checks where it can:
// positions must be integers in [0, 2^bits − 1] with bits the info's
// vertex_quantization_bits (10 or 16); a mesh may be empty (a zero-length
// fragment serves that better: Neuroglancer allows zero-size fragments).
//
// Draco's decoder rejects a stream holding fewer than three bytes per face
// after the counts, a guard regular meshes code below (smooth surfaces take
// about 2 to 2.5 bytes a face here). The encoder then ends the stream with
// zero bytes up to that size; decoders stop reading after the attribute
// and never see them. So a fragment costs at least 3 bytes per face, half
// of what plain 16-bit indices alone would, and a quarter of a legacy
// mesh's float32 vertices and uint32 indices.
package draco

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// MaxBits is the largest Bits a Mesh may declare: Draco's wrap transform
// needs the value range to fit an int32 with room to spare.
const MaxBits = 30

// MaxVertices and MaxFaces bound a mesh so every count fits the bitstream's
// 32-bit fields and the decoder's own limits (3·F indices in a uint32).
const (
	MaxVertices = 1<<31 - 1
	MaxFaces    = (1<<32 - 1) / 3
)

// Mesh is a triangle mesh whose vertex positions are already integers.
type Mesh struct {
	// Bits bounds every coordinate to [0, 2^Bits − 1]; 1..MaxBits.
	// Neuroglancer's vertex_quantization_bits (10 or 16).
	Bits int
	// Positions holds x, y, z per vertex: vertex i is Positions[3i:3i+3].
	Positions []uint32
	// Faces holds three vertex indices per triangle, in the winding to keep.
	Faces []uint32
}

// ErrInvalidMesh is matched (errors.Is) by every *InputError.
var ErrInvalidMesh = errors.New("invalid mesh")

// InputError says what is wrong with a Mesh given to the encoder.
type InputError struct {
	Field  string // "Bits", "Positions" or "Faces"
	Index  int    // element of Field at fault, -1 for the whole field
	Reason string
}

func (e *InputError) Error() string {
	if e.Index >= 0 {
		return fmt.Sprintf("draco: %s[%d]: %s", e.Field, e.Index, e.Reason)
	}
	return fmt.Sprintf("draco: %s: %s", e.Field, e.Reason)
}

// Is makes every *InputError match ErrInvalidMesh.
func (e *InputError) Is(t error) bool { return t == ErrInvalidMesh }

// Bitstream constants (Draco spec, "Descriptions").
const (
	versionMajor       = 2
	versionMinor       = 2
	encoderTypeMesh    = 1
	methodSequential   = 0
	indicesCompressed  = 0
	attributePosition  = 0
	dataTypeInt32      = 5
	seqEncoderGeneric  = 0
	seqEncoderInteger  = 1
	predictionDiff     = 0
	transformWrap      = 1
	symbolCodingTagged = 0
	symbolCodingRaw    = 1
)

// Encoder encodes meshes, reusing its scratch memory from one call to the
// next. The zero value is ready to use; an Encoder is not safe for
// concurrent use (keep one per goroutine, or in a sync.Pool).
type Encoder struct {
	symbols []uint32 // the symbols of one stream
	sym     symbolCoder
}

// Encode returns the Draco encoding of m in a new buffer.
func Encode(m Mesh) ([]byte, error) {
	var e Encoder
	return e.Append(nil, m)
}

// Append appends the Draco encoding of m to dst and returns the extended
// buffer (dst's spare capacity is used first, as with the append built-in).
// On error dst is returned unchanged with an error matching ErrInvalidMesh.
func (e *Encoder) Append(dst []byte, m Mesh) ([]byte, error) {
	if err := m.check(); err != nil {
		return dst, err
	}
	numPoints := len(m.Positions) / 3
	numFaces := len(m.Faces) / 3

	dst = append(dst, "DRACO"...)
	dst = append(dst, versionMajor, versionMinor, encoderTypeMesh, methodSequential)
	dst = binary.LittleEndian.AppendUint16(dst, 0) // flags: no metadata
	dst = binary.AppendUvarint(dst, uint64(numFaces))
	dst = binary.AppendUvarint(dst, uint64(numPoints))
	start := len(dst)
	dst = e.appendIndices(dst, m.Faces)
	dst = e.appendPositions(dst, m.Positions)
	// Draco's decoder refuses a stream with fewer than 3 bytes per face
	// after the counts (its guard against absurd face counts), which a
	// regular mesh codes well below; zeros at the end, which no decoder
	// reads, make up the difference. (Plain indices would cost more: at
	// least those 3 bytes per face, and 6 from 256 vertices on.)
	for len(dst)-start < 3*numFaces {
		dst = append(dst, 0)
	}
	return dst, nil
}

func (m *Mesh) check() error {
	if m.Bits < 1 || m.Bits > MaxBits {
		return &InputError{Field: "Bits", Index: -1, Reason: fmt.Sprintf("%d is outside 1..%d", m.Bits, MaxBits)}
	}
	if len(m.Positions)%3 != 0 {
		return &InputError{Field: "Positions", Index: -1, Reason: fmt.Sprintf("length %d is not a multiple of 3", len(m.Positions))}
	}
	if len(m.Faces)%3 != 0 {
		return &InputError{Field: "Faces", Index: -1, Reason: fmt.Sprintf("length %d is not a multiple of 3", len(m.Faces))}
	}
	if len(m.Positions)/3 > MaxVertices {
		return &InputError{Field: "Positions", Index: -1, Reason: fmt.Sprintf("%d vertices, more than %d", len(m.Positions)/3, MaxVertices)}
	}
	if len(m.Faces)/3 > MaxFaces {
		return &InputError{Field: "Faces", Index: -1, Reason: fmt.Sprintf("%d faces, more than %d", len(m.Faces)/3, MaxFaces)}
	}
	if len(m.Positions) > 3*len(m.Faces) {
		return &InputError{Field: "Positions", Index: -1, Reason: fmt.Sprintf(
			"%d vertices for %d faces: Draco decoders before 1.5.7 (Neuroglancer's is 1.4.1) refuse more than 3 per face; leave unused vertices out",
			len(m.Positions)/3, len(m.Faces)/3)}
	}
	limit := uint32(1)<<m.Bits - 1
	for i, v := range m.Positions {
		if v > limit {
			return &InputError{Field: "Positions", Index: i, Reason: fmt.Sprintf("%d is above 2^%d-1", v, m.Bits)}
		}
	}
	n := uint32(len(m.Positions) / 3)
	for i, v := range m.Faces {
		if v >= n {
			return &InputError{Field: "Faces", Index: i, Reason: fmt.Sprintf("vertex %d does not exist (%d vertices)", v, n)}
		}
	}
	return nil
}

// appendIndices writes connectivity method 0: each index as its difference
// from the previous index (the first from 0), |d|<<1 | sign, entropy coded as
// one stream.
func (e *Encoder) appendIndices(dst []byte, faces []uint32) []byte {
	dst = append(dst, indicesCompressed)
	syms := grow(e.symbols, len(faces))
	last := int64(0)
	for i, v := range faces {
		d := int64(v) - last
		if d < 0 {
			syms[i] = uint32(-d)<<1 | 1
		} else {
			syms[i] = uint32(d) << 1
		}
		last = int64(v)
	}
	e.symbols = syms
	return e.sym.appendSymbols(dst, syms, 1)
}

// appendPositions writes the attribute section: one sequential attributes
// decoder holding the POSITION attribute, integer coded with the
// difference prediction and the wrap transform.
func (e *Encoder) appendPositions(dst []byte, pos []uint32) []byte {
	dst = append(dst, 1) // attribute decoders
	dst = binary.AppendUvarint(dst, 1)
	dst = append(dst, attributePosition, dataTypeInt32, 3, 0) // type, data type, components, normalized
	dst = binary.AppendUvarint(dst, 0)                        // unique id
	if len(pos) == 0 {
		// The integer decoder refuses zero values (its empty buffer has no
		// address); the generic one, raw values, reads none.
		return append(dst, seqEncoderGeneric)
	}
	dst = append(dst, seqEncoderInteger)

	// The value range, over every component, bounds the wrap.
	lo, hi := uint32(math.MaxUint32), uint32(0)
	for _, v := range pos {
		lo = min(lo, v)
		hi = max(hi, v)
	}
	span := int64(hi) - int64(lo) + 1 // Draco's max_dif
	maxCorr := span / 2
	minCorr := -maxCorr
	if span%2 == 0 {
		maxCorr--
	}

	syms := grow(e.symbols, len(pos))
	for i, v := range pos {
		pred := int64(lo) // the first vertex is predicted by 0, clamped up to lo
		if i >= 3 {
			pred = int64(pos[i-3])
		}
		c := int64(v) - pred
		if c < minCorr {
			c += span
		} else if c > maxCorr {
			c -= span
		}
		if c >= 0 {
			syms[i] = uint32(c) << 1
		} else {
			syms[i] = uint32(-c-1)<<1 | 1
		}
	}
	e.symbols = syms

	dst = append(dst, predictionDiff, transformWrap, 1) // method, transform, compressed
	dst = e.sym.appendSymbols(dst, syms, 3)
	dst = binary.LittleEndian.AppendUint32(dst, lo) // wrap bounds, int32
	dst = binary.LittleEndian.AppendUint32(dst, hi)
	return dst
}

// grow returns s resized to n, reusing its array when it is large enough.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
