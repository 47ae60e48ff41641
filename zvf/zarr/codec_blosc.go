package zarr

import (
	"encoding/json"
	"sync"

	"github.com/zvfserve/zvfserve/zvf/zarr/blosc"
)

// The blosc codec: C-Blosc1 frames (zvf/zarr/blosc).

func makeBlosc(cs *Codecs, s CodecSpec, in rep) (resolved, error) {
	var cfg struct {
		Cname     string          `json:"cname"`
		Clevel    int             `json:"clevel"`
		Shuffle   json.RawMessage `json:"shuffle"`
		Typesize  int             `json:"typesize"`
		Blocksize int             `json:"blocksize"`
	}
	if err := json.Unmarshal(s.Configuration, &cfg); err != nil {
		return resolved{}, metaErr("blosc configuration: %v", err)
	}
	var sh int
	var name string
	if json.Unmarshal(cfg.Shuffle, &name) == nil {
		var err error
		if sh, err = blosc.ParseShuffle(name); err != nil {
			return resolved{}, metaErr("%v", err)
		}
	} else if json.Unmarshal(cfg.Shuffle, &sh) != nil || sh < 0 || sh > 2 {
		return resolved{}, metaErr("blosc shuffle %s", cfg.Shuffle)
	}
	if cfg.Typesize == 0 {
		cfg.Typesize = max(in.typ.Size, 1)
	}
	opts := blosc.Options{Codec: cfg.Cname, Level: cfg.Clevel, Shuffle: sh, TypeSize: cfg.Typesize, BlockSize: cfg.Blocksize}
	return resolved{bb: &bloscCodec{cs: cs, enc: sync.OnceValues(func() (*blosc.Encoder, error) { return blosc.NewEncoder(opts) })}}, nil
}

type bloscCodec struct {
	cs *Codecs
	// enc is made on the first write and reused by every chunk after it;
	// not at open, where a read-only compressor (blosclz) must not fail.
	enc func() (*blosc.Encoder, error)
}

func (*bloscCodec) name() string { return "blosc" }

func (c *bloscCodec) decode(b []byte, size outSize) ([]byte, error) {
	if size.exact >= 0 {
		n, err := corruptIf(blosc.DecodedSize(b))
		if err != nil {
			return nil, err
		}
		if int64(n) != size.exact {
			return nil, corrupt("blosc frame decodes to %d bytes, the chunk has %d", n, size.exact)
		}
		return corruptIf(c.cs.blosc.DecodeLimit(make([]byte, 0, n), b, n))
	}
	// No room in dst: the decoder grows its output with the real blocks.
	return corruptIf(c.cs.blosc.DecodeLimit(nil, b, int(min(size.max, 1<<31-1))))
}

func (c *bloscCodec) encode(b []byte) ([]byte, error) {
	enc, err := c.enc()
	if err != nil {
		return nil, err
	}
	return enc.Encode(nil, b)
}
