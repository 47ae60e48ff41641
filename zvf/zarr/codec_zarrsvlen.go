package zarr

import (
	"encoding/json"

	"github.com/zvfserve/zvfserve/vlen"
)

// zarrsVlen adapts vlen.Zarrs: the index chain is a Zarr pipeline over the
// n+1 offsets, the data chain a "bytes" codec followed by bytes→bytes
// codecs over the concatenated element bytes.
func makeZarrsVlen(cs *Codecs, s CodecSpec, in rep) (resolved, error) {
	return arrayToBytesCodec(cs.newZarrsVlen(s.Name, s.Configuration, in))
}

type zarrsVlen struct {
	codecName string
	layout    vlen.Zarrs
	index     *pipeline
	data      []bytesToBytes // after the data chain's bytes codec
}

func (cs *Codecs) newZarrsVlen(name string, cfg json.RawMessage, in rep) (*zarrsVlen, error) {
	if !in.typ.Variable() {
		return nil, metaErr("codec %s needs a variable-length data type, have %s", name, in.typ.Name)
	}
	var c struct {
		DataCodecs    []json.RawMessage `json:"data_codecs"`
		IndexCodecs   []json.RawMessage `json:"index_codecs"`
		IndexDataType string            `json:"index_data_type"`
		IndexLocation string            `json:"index_location"`
	}
	if err := json.Unmarshal(cfg, &c); err != nil {
		return nil, metaErr("%s configuration: %v", name, err)
	}
	z := &zarrsVlen{codecName: name}
	switch c.IndexDataType {
	case "uint32", "int32":
		z.layout.OffsetSize = 4
	case "", "uint64", "int64":
		z.layout.OffsetSize = 8
	default:
		return nil, metaErr("%s index_data_type %q", name, c.IndexDataType)
	}
	switch c.IndexLocation {
	case "", "start":
	case "end":
		z.layout.IndexAtEnd = true
	default:
		return nil, metaErr("%s index_location %q", name, c.IndexLocation)
	}
	specs := func(list []json.RawMessage, dflt string) ([]CodecSpec, error) {
		if len(list) == 0 {
			return []CodecSpec{{Name: "bytes", Configuration: json.RawMessage(dflt)}}, nil
		}
		return parseCodecSpecs(list)
	}
	idxSpecs, err := specs(c.IndexCodecs, `{"endian":"little"}`)
	if err != nil {
		return nil, err
	}
	it, _ := ParseDataType("uint64")
	if z.layout.OffsetSize == 4 {
		it, _ = ParseDataType("uint32")
	}
	n := prod(in.shape)
	ip, err := cs.build(name+" index", idxSpecs, rep{shape: []int64{n + 1}, typ: it, fill: make([]byte, it.Size)})
	if err != nil {
		return nil, err
	}
	dataSpecs, err := specs(c.DataCodecs, "")
	if err != nil {
		return nil, err
	}
	if dataSpecs[0].Name != "bytes" {
		return nil, unsupported("%s data codecs must start with bytes, not %s", name, dataSpecs[0].Name)
	}
	u8, _ := ParseDataType("uint8")
	var bb []bytesToBytes
	for _, sp := range dataSpecs[1:] {
		c, err := cs.newCodec(sp, rep{shape: []int64{1}, typ: u8, fill: []byte{0}})
		if err != nil {
			return nil, err
		}
		if c.bb == nil {
			return nil, unsupported("%s data codec %s is not bytes→bytes", name, sp.Name)
		}
		bb = append(bb, c.bb)
	}
	z.index, z.data = ip, bb
	z.layout.DecodeIndex = func(b []byte) ([]byte, error) {
		c, err := ip.decode(b)
		if err != nil {
			return nil, err
		}
		return c.Data, nil
	}
	z.layout.EncodeIndex = func(b []byte) ([]byte, error) {
		return ip.encode(&Chunk{Shape: []int64{n + 1}, Type: it, Data: b})
	}
	z.layout.DecodeData = func(b []byte) ([]byte, error) {
		var err error
		for i := len(bb) - 1; i >= 0; i-- {
			if b, err = bb[i].decode(b, upTo(maxExpand(int64(len(b)), -1, cs.lim.MaxChunkBytes))); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	z.layout.EncodeData = func(b []byte) ([]byte, error) {
		var err error
		for _, c := range bb {
			if b, err = c.encode(b); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	return z, nil
}

func (z *zarrsVlen) name() string        { return z.codecName }
func (*zarrsVlen) encodedSize(rep) int64 { return -1 }

func (z *zarrsVlen) decode(b []byte, r rep) (*Chunk, error) {
	n := prod(r.shape)
	if n > int64(len(b))+1<<20 {
		return nil, corrupt("%d elements cannot come from %d bytes", n, len(b))
	}
	elems, err := corruptIf(z.layout.Decode(b, int(n)))
	if err != nil {
		return nil, err
	}
	if r.typ.Kind == KindString {
		for _, e := range elems {
			if !validUTF8(e) {
				return nil, corrupt("string element is not valid UTF-8")
			}
		}
	}
	return &Chunk{Shape: r.shape, Type: r.typ, Elems: elems}, nil
}

func (z *zarrsVlen) encode(c *Chunk, _ rep) ([]byte, error) { return z.layout.Encode(c.Elems) }
