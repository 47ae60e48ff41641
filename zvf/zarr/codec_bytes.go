package zarr

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
)

// The bytes codec: fixed-size elements in C order, little- or big-endian.

func makeBytes(_ *Codecs, s CodecSpec, in rep) (resolved, error) {
	return arrayToBytesCodec(newBytesCodec(s.Configuration, in))
}

type bytesCodec struct{ big bool }

func newBytesCodec(cfg json.RawMessage, in rep) (*bytesCodec, error) {
	var c struct {
		Endian *string `json:"endian"`
	}
	if len(cfg) > 0 {
		if err := json.Unmarshal(cfg, &c); err != nil {
			return nil, metaErr("bytes configuration: %v", err)
		}
	}
	if in.typ.Variable() {
		return nil, metaErr("codec bytes cannot encode variable-length %s", in.typ.Name)
	}
	bc := &bytesCodec{}
	if c.Endian != nil {
		switch *c.Endian {
		case "little":
		case "big":
			bc.big = true
		default:
			return nil, metaErr("bytes endian %q", *c.Endian)
		}
	} else if in.typ.Size > 1 {
		return nil, metaErr("bytes codec needs endian for %s", in.typ.Name)
	}
	return bc, nil
}

func (bytesCodec) name() string { return "bytes" }

func (bytesCodec) encodedSize(r rep) int64 { return prod(r.shape) * int64(r.typ.Size) }

func (c bytesCodec) decode(b []byte, r rep) (*Chunk, error) {
	want := prod(r.shape) * int64(r.typ.Size)
	if int64(len(b)) != want {
		return nil, corrupt("%d bytes, want %d (%d × %s)", len(b), want, prod(r.shape), r.typ.Name)
	}
	if c.big {
		swapInPlace(b, r.typ)
	}
	return &Chunk{Shape: r.shape, Type: r.typ, Data: b}, nil
}

func (c bytesCodec) encode(ch *Chunk, r rep) ([]byte, error) {
	if !c.big {
		return ch.Data, nil
	}
	out := bytes.Clone(ch.Data)
	swapInPlace(out, r.typ)
	return out, nil
}

// swapInPlace reverses the byte order of every element (complex: of each
// half).
func swapInPlace(b []byte, t DataType) {
	w := t.Size
	if t.Kind == KindComplex {
		w /= 2
	}
	switch w {
	case 2:
		for i := 0; i+2 <= len(b); i += 2 {
			binary.LittleEndian.PutUint16(b[i:], bits.ReverseBytes16(binary.LittleEndian.Uint16(b[i:])))
		}
	case 4:
		for i := 0; i+4 <= len(b); i += 4 {
			binary.LittleEndian.PutUint32(b[i:], bits.ReverseBytes32(binary.LittleEndian.Uint32(b[i:])))
		}
	case 8:
		for i := 0; i+8 <= len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], bits.ReverseBytes64(binary.LittleEndian.Uint64(b[i:])))
		}
	}
}
