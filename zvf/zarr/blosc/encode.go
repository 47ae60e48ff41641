package blosc

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Shuffle modes.
const (
	NoShuffle  = 0
	Shuffle    = 1
	BitShuffle = 2
)

// Options choose how Encode compresses.
type Options struct {
	Codec     string // lz4, lz4hc, zlib, zstd
	Level     int    // 0-9; 0 stores the data (memcpyed frame)
	Shuffle   int
	TypeSize  int
	BlockSize int // 0: automatic
}

// ParseShuffle maps Zarr's shuffle names to modes.
func ParseShuffle(s string) (int, error) {
	switch s {
	case "noshuffle", "":
		return NoShuffle, nil
	case "shuffle":
		return Shuffle, nil
	case "bitshuffle":
		return BitShuffle, nil
	}
	return 0, fmt.Errorf("blosc: unknown shuffle %q", s)
}

// Encode compresses src into one frame (appended to dst[:0]). Blocks are
// not split (flag 0x10), which every C-Blosc1 reader accepts.
func Encode(dst, src []byte, o Options) ([]byte, error) {
	if o.TypeSize < 1 || o.TypeSize > 255 {
		return nil, fmt.Errorf("blosc: typesize %d", o.TypeSize)
	}
	if len(src) > 1<<31-1-headerSize {
		return nil, fmt.Errorf("blosc: %d bytes exceed a frame", len(src))
	}
	var code byte
	switch o.Codec {
	case "lz4", "lz4hc":
		code = codeLZ4
	case "zlib":
		code = codeZlib
	case "zstd":
		code = codeZstd
	default:
		return nil, fmt.Errorf("blosc: cannot encode with %q", o.Codec)
	}
	bs := o.BlockSize
	if bs <= 0 {
		bs = 256 << 10
	}
	if bs > len(src) {
		bs = len(src)
	}
	if bs < 1 {
		bs = 1
	}
	flags := byte(flagDontSplit) | code<<5
	switch o.Shuffle {
	case Shuffle:
		flags |= flagShuffle
	case BitShuffle:
		flags |= flagBitShuffle
	}
	memcpy := func() []byte {
		out := append(dst[:0], make([]byte, headerSize)...)
		out = append(out, src...)
		putHeader(out, flags|flagMemcpy, o.TypeSize, len(src), bs)
		return out
	}
	if o.Level == 0 || len(src) == 0 {
		return memcpy(), nil
	}
	nblocks := (len(src) + bs - 1) / bs
	out := append(dst[:0], make([]byte, headerSize+4*nblocks)...)
	tmp := make([]byte, bs)
	var zenc *zstd.Encoder
	if code == codeZstd {
		var err error
		if zenc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(o.Level)), zstd.WithEncoderConcurrency(1)); err != nil {
			return nil, err
		}
		defer zenc.Close()
	}
	for b := 0; b < nblocks; b++ {
		block := src[b*bs : min((b+1)*bs, len(src))]
		in := block
		switch {
		case o.Shuffle == Shuffle && o.TypeSize > 1:
			shuffle(tmp[:len(block)], block, o.TypeSize)
			in = tmp[:len(block)]
		case o.Shuffle == BitShuffle && len(block) >= o.TypeSize:
			bitshuffle(tmp[:len(block)], block, o.TypeSize)
			in = tmp[:len(block)]
		}
		binary.LittleEndian.PutUint32(out[headerSize+4*b:], uint32(len(out)))
		c, err := compress(code, o, zenc, in)
		if err != nil {
			return nil, err
		}
		if len(c) >= len(in) {
			c = in // stored: a stream as long as the block is copied on decode
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(len(c)))
		out = append(out, c...)
	}
	if len(out) >= len(src)+headerSize {
		return memcpy(), nil
	}
	putHeader(out, flags, o.TypeSize, len(src), bs)
	return out, nil
}

func putHeader(out []byte, flags byte, ts, nbytes, bs int) {
	out[0], out[1], out[2], out[3] = 2, 1, flags, byte(ts)
	binary.LittleEndian.PutUint32(out[4:], uint32(nbytes))
	binary.LittleEndian.PutUint32(out[8:], uint32(bs))
	binary.LittleEndian.PutUint32(out[12:], uint32(len(out)))
}

func compress(code byte, o Options, zenc *zstd.Encoder, in []byte) ([]byte, error) {
	switch code {
	case codeLZ4:
		buf := make([]byte, lz4.CompressBlockBound(len(in)))
		var n int
		var err error
		if o.Codec == "lz4hc" {
			n, err = lz4.CompressBlockHC(in, buf, lz4.CompressionLevel(1<<(8+min(o.Level, 9))), nil, nil)
		} else {
			var c lz4.Compressor
			n, err = c.CompressBlock(in, buf)
		}
		if err != nil {
			return nil, err
		}
		if n == 0 { // incompressible
			return in, nil
		}
		return buf[:n], nil
	case codeZlib:
		var b bytes.Buffer
		w, err := zlib.NewWriterLevel(&b, min(o.Level, 9))
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(in); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	}
	return zenc.EncodeAll(in, nil), nil
}

// Encoder encodes frames with one set of Options.
type Encoder struct{ o Options }

// NewEncoder checks o and returns an encoder for it.
func NewEncoder(o Options) (*Encoder, error) { return &Encoder{o: o}, nil }

// Encode compresses src into one frame (appended to dst[:0]).
func (e *Encoder) Encode(dst, src []byte) ([]byte, error) { return Encode(dst, src, e.o) }
