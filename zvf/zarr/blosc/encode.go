package blosc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"

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

// Encode compresses src into one frame (appended to dst[:0]) with a
// one-off Encoder; callers encoding many frames keep an Encoder instead.
func Encode(dst, src []byte, o Options) ([]byte, error) {
	e, err := NewEncoder(o)
	if err != nil {
		return nil, err
	}
	return e.Encode(dst, src)
}

// Encoder writes frames with one set of Options, reusing its compressors
// (a zstd encoder's tables are about a megabyte, a zlib writer's a few
// hundred kilobytes) and buffers across blocks and frames. It is safe for
// concurrent use: each Encode takes an idle state or makes one, so it
// holds as many as ran at once.
type Encoder struct {
	o     Options
	code  byte
	flags byte

	mu   sync.Mutex
	idle []*encState // kept, not in a sync.Pool: a collection would drop the tables reuse exists to keep
}

// encState is what one Encode call uses; the compressors are made on first
// use. zenc is only used through EncodeAll, which starts no goroutine, so
// it needs no Close.
type encState struct {
	tmp  []byte // a shuffled block
	out  []byte // a compressed block
	zbuf bytes.Buffer
	zw   *zlib.Writer
	zenc *zstd.Encoder
	lz4  lz4.Compressor
	lzhc lz4.CompressorHC
}

// NewEncoder checks o and returns an encoder for it.
func NewEncoder(o Options) (*Encoder, error) {
	if o.TypeSize < 1 || o.TypeSize > 255 {
		return nil, fmt.Errorf("blosc: typesize %d", o.TypeSize)
	}
	e := &Encoder{o: o}
	switch o.Codec {
	case "lz4", "lz4hc":
		e.code = codeLZ4
	case "zlib":
		e.code = codeZlib
	case "zstd":
		e.code = codeZstd
	default:
		return nil, fmt.Errorf("blosc: cannot encode with %q", o.Codec)
	}
	e.flags = byte(flagDontSplit) | e.code<<5
	switch o.Shuffle {
	case Shuffle:
		e.flags |= flagShuffle
	case BitShuffle:
		e.flags |= flagBitShuffle
	}
	return e, nil
}

func (e *Encoder) get() *encState {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n := len(e.idle); n > 0 {
		st := e.idle[n-1]
		e.idle = e.idle[:n-1]
		return st
	}
	return &encState{}
}

func (e *Encoder) put(st *encState) {
	e.mu.Lock()
	e.idle = append(e.idle, st)
	e.mu.Unlock()
}

// Encode compresses src into one frame (appended to dst[:0]). Blocks are
// not split (flag 0x10), which every C-Blosc1 reader accepts.
func (e *Encoder) Encode(dst, src []byte) ([]byte, error) {
	o := e.o
	if len(src) > 1<<31-1-headerSize {
		return nil, fmt.Errorf("blosc: %d bytes exceed a frame", len(src))
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
	memcpy := func() []byte {
		out := append(dst[:0], make([]byte, headerSize)...)
		out = append(out, src...)
		putHeader(out, e.flags|flagMemcpy, o.TypeSize, len(src), bs)
		return out
	}
	if o.Level == 0 || len(src) == 0 {
		return memcpy(), nil
	}
	st := e.get()
	defer e.put(st)
	nblocks := (len(src) + bs - 1) / bs
	out := append(dst[:0], make([]byte, headerSize+4*nblocks)...)
	if cap(st.tmp) < bs {
		st.tmp = make([]byte, bs)
	}
	tmp := st.tmp[:bs]
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
		c, err := e.compress(st, in)
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
	putHeader(out, e.flags, o.TypeSize, len(src), bs)
	return out, nil
}

func putHeader(out []byte, flags byte, ts, nbytes, bs int) {
	out[0], out[1], out[2], out[3] = 2, 1, flags, byte(ts)
	binary.LittleEndian.PutUint32(out[4:], uint32(nbytes))
	binary.LittleEndian.PutUint32(out[8:], uint32(bs))
	binary.LittleEndian.PutUint32(out[12:], uint32(len(out)))
}

// compress returns in's compressed stream, in st's buffers (valid until the
// next call), or in itself when it does not compress.
func (e *Encoder) compress(st *encState, in []byte) ([]byte, error) {
	o := e.o
	switch e.code {
	case codeLZ4:
		if n := lz4.CompressBlockBound(len(in)); cap(st.out) < n {
			st.out = make([]byte, n)
		}
		buf := st.out[:lz4.CompressBlockBound(len(in))]
		var n int
		var err error
		if o.Codec == "lz4hc" {
			st.lzhc.Level = lz4.CompressionLevel(1 << (8 + min(o.Level, 9)))
			n, err = st.lzhc.CompressBlock(in, buf)
		} else {
			n, err = st.lz4.CompressBlock(in, buf)
		}
		if err != nil {
			return nil, err
		}
		if n == 0 { // incompressible
			return in, nil
		}
		return buf[:n], nil
	case codeZlib:
		st.zbuf.Reset()
		if st.zw == nil {
			var err error
			if st.zw, err = zlib.NewWriterLevel(&st.zbuf, min(o.Level, 9)); err != nil {
				return nil, err
			}
		} else {
			st.zw.Reset(&st.zbuf)
		}
		if _, err := st.zw.Write(in); err != nil {
			return nil, err
		}
		if err := st.zw.Close(); err != nil {
			return nil, err
		}
		return st.zbuf.Bytes(), nil
	}
	if st.zenc == nil {
		var err error
		if st.zenc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(o.Level)), zstd.WithEncoderConcurrency(1)); err != nil {
			return nil, err
		}
	}
	st.out = st.zenc.EncodeAll(in, st.out[:0])
	return st.out, nil
}
