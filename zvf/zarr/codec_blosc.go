package zarr

import (
	"encoding/json"

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
	return resolved{bb: &bloscCodec{cs: cs, opts: blosc.Options{Codec: cfg.Cname, Level: cfg.Clevel, Shuffle: sh, TypeSize: cfg.Typesize, BlockSize: cfg.Blocksize}}}, nil
}

type bloscCodec struct {
	cs   *Codecs
	opts blosc.Options
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

func (c *bloscCodec) encode(b []byte) ([]byte, error) { return blosc.Encode(nil, b, c.opts) }
