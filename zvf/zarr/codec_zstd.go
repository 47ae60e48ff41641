package zarr

import (
	"encoding/json"

	"github.com/klauspost/compress/zstd"
)

// The zstd codec, and the zstd decoder and encoders a *Codecs shares.

func makeZstd(cs *Codecs, s CodecSpec, _ rep) (resolved, error) {
	var cfg struct {
		Level    int  `json:"level"`
		Checksum bool `json:"checksum"`
	}
	if len(s.Configuration) > 0 {
		if err := json.Unmarshal(s.Configuration, &cfg); err != nil {
			return resolved{}, metaErr("zstd configuration: %v", err)
		}
	}
	return resolved{bb: &zstdCodec{cs: cs, level: cfg.Level}}, nil
}

func (cs *Codecs) zstdDecoder() (*zstd.Decoder, error) {
	cs.zdecOnce.Do(func() {
		// Concurrency 0 = GOMAXPROCS decoders for DecodeAll. The cap
		// limit keeps DecodeAll inside the buffer it is given: otherwise
		// it allocates whatever content size a frame header declares.
		cs.zdec, cs.zdecErr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<31), zstd.WithDecodeAllCapLimit(true))
	})
	return cs.zdec, cs.zdecErr
}

func (cs *Codecs) zstdEncoder(level int) (*zstd.Encoder, error) {
	cs.zencMu.Lock()
	defer cs.zencMu.Unlock()
	if e, ok := cs.zenc[level]; ok {
		return e, nil
	}
	// Single-segment frames always carry their content size; numcodecs
	// rejects small frames without one.
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)), zstd.WithEncoderConcurrency(1), zstd.WithSingleSegment(true))
	if err != nil {
		return nil, err
	}
	if cs.zenc == nil {
		cs.zenc = map[int]*zstd.Encoder{}
	}
	cs.zenc[level] = e
	return e, nil
}

type zstdCodec struct {
	cs    *Codecs
	level int
}

func (*zstdCodec) name() string { return "zstd" }

// zstdPlausible is the output a zstd input of n bytes may have allocated
// at once from its frames' declared sizes: more is believed only when the
// frames really produce it.
func zstdPlausible(n int) int64 { return 32*int64(n) + 64<<10 }

func (c *zstdCodec) decode(b []byte, size outSize) ([]byte, error) {
	d, err := c.cs.zstdDecoder()
	if err != nil {
		return nil, err
	}
	frames, total, err := scanZstd(b)
	if err != nil {
		return nil, err
	}
	if size.exact >= 0 {
		if total >= 0 && total != size.exact {
			return nil, corrupt("zstd frames declare %d bytes, the chunk has %d", total, size.exact)
		}
		out, err := zstdDecodeCap(d, b, size.exact)
		if err != nil {
			return nil, err
		}
		return out, nil
	}
	if total > size.max {
		return nil, corrupt("zstd frames declare %d bytes, at most %d expected", total, size.max)
	}
	if total >= 0 && total <= zstdPlausible(len(b)) {
		out, err := zstdDecodeCap(d, b, total)
		switch {
		case err != nil:
			return nil, err
		case int64(len(out)) != total:
			return nil, corrupt("zstd frames decode to %d bytes, declared %d", len(out), total)
		}
		return out, nil
	}
	// The declared size is implausible for the input (or absent): decode
	// without it, into buffers that double only once the previous one was
	// filled with real output.
	src := b
	if total >= 0 {
		src = stripContentSizes(b, frames)
	}
	cp := min(size.max, max(zstdPlausible(len(b)), 4*zstdBlockMax))
	for {
		out, err := zstdDecodeCap(d, src, cp)
		switch {
		case err == nil:
			if total >= 0 && int64(len(out)) != total {
				return nil, corrupt("zstd frames decode to %d bytes, declared %d", len(out), total)
			}
			return out, nil
		case int64(len(out)) <= cp-zstdBlockMax-64:
			// Not for want of room: the next block would have fit.
			return nil, err
		case cp >= size.max:
			return nil, corrupt("zstd output exceeds %d bytes", size.max)
		}
		cp = min(size.max, 2*cp)
	}
}

// zstdDecodeCap decodes into a buffer of capacity n, which the (cap-limited)
// decoder does not outgrow by more than a block. On an error it also
// returns the output decoded so far: a buffer that ran out of room fails
// with whatever error the block decoder reports, so callers tell that case
// by how full it got.
func zstdDecodeCap(d *zstd.Decoder, b []byte, n int64) ([]byte, error) {
	out, err := d.DecodeAll(b, make([]byte, 0, n))
	if err != nil {
		return out, corrupt("zstd: %v", err)
	}
	return out, nil
}

func (c *zstdCodec) encode(b []byte) ([]byte, error) {
	e, err := c.cs.zstdEncoder(c.level)
	if err != nil {
		return nil, err
	}
	return e.EncodeAll(b, make([]byte, 0, len(b)/2+64)), nil
}
