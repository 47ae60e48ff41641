package zarr

import (
	"unicode/utf8"

	"github.com/zvfserve/zvfserve/vlen"
)

// The vlen-bytes and vlen-utf8 codecs: zarr-python's variable-length
// layout (vlen.VlenBytes).

func makeVlen(_ *Codecs, s CodecSpec, in rep) (resolved, error) {
	if !in.typ.Variable() {
		return resolved{}, metaErr("codec %s needs a variable-length data type, have %s", s.Name, in.typ.Name)
	}
	return resolved{ab: &vlenCodec{codecName: s.Name, layout: vlen.VlenBytes{UTF8: s.Name == "vlen-utf8"}}}, nil
}

type vlenCodec struct {
	codecName string
	layout    vlen.Layout
}

func (c *vlenCodec) name() string          { return c.codecName }
func (c *vlenCodec) encodedSize(rep) int64 { return -1 }

func (c *vlenCodec) decode(b []byte, r rep) (*Chunk, error) {
	n := prod(r.shape)
	if n > int64(len(b)) {
		return nil, corrupt("%d elements cannot fit in %d bytes", n, len(b))
	}
	elems, err := corruptIf(c.layout.Decode(b, int(n)))
	if err != nil {
		return nil, err
	}
	return &Chunk{Shape: r.shape, Type: r.typ, Elems: elems}, nil
}

func (c *vlenCodec) encode(ch *Chunk, _ rep) ([]byte, error) { return c.layout.Encode(ch.Elems) }

func validUTF8(b []byte) bool { return utf8.Valid(b) }
