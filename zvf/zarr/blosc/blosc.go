// Package blosc reads and writes C-Blosc1 frames (the format numcodecs and
// zarr-python's "blosc" codec produce): a 16-byte header, a block-start
// table, and per block one stream or typesize split streams compressed
// with blosclz, lz4/lz4hc, zlib, zstd or snappy, then byte- or
// bit-unshuffled. Memcpyed frames carry the data raw after the header.
//
// Every size in the header is checked against the frame and the caller's
// limit before anything is allocated.
package blosc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

const (
	headerSize     = 16
	flagShuffle    = 0x01
	flagMemcpy     = 0x02
	flagBitShuffle = 0x04
	flagReserved   = 0x08
	flagDontSplit  = 0x10

	maxSplits     = 16
	minBufferSize = 128
	// maxBlockSize mirrors C-Blosc's BLOSC_MAX_BLOCKSIZE bound.
	maxBlockSize = (1<<31 - 1 - 255*4) / 3
)

// Compressor codes in bits 5-7 of the flags.
const (
	codeBloscLZ = 0
	codeLZ4     = 1
	codeSnappy  = 2
	codeZlib    = 3
	codeZstd    = 4
)

// Error reports a malformed or unsupported frame.
type Error struct{ Reason string }

func (e *Error) Error() string { return "blosc: " + e.Reason }

// ErrCorrupt is matched by every *Error from Decode.
var ErrCorrupt = errors.New("blosc: corrupt frame")

func (e *Error) Is(t error) bool { return t == ErrCorrupt }

func bad(f string, a ...any) error { return &Error{fmt.Sprintf(f, a...)} }

type header struct {
	flags    byte
	typesize int
	nbytes   int
	blocks   int
	cbytes   int
}

func parseHeader(src []byte) (header, error) {
	var h header
	if len(src) < headerSize {
		return h, bad("frame of %d bytes has no header", len(src))
	}
	if src[0] < 1 || src[0] > 4 {
		return h, bad("format version %d", src[0])
	}
	h.flags = src[2]
	h.typesize = int(src[3])
	h.nbytes = int(binary.LittleEndian.Uint32(src[4:]))
	h.blocks = int(binary.LittleEndian.Uint32(src[8:]))
	h.cbytes = int(binary.LittleEndian.Uint32(src[12:]))
	if h.flags&flagReserved != 0 {
		return h, bad("reserved flag set")
	}
	if h.cbytes != len(src) {
		return h, bad("header says %d compressed bytes, frame has %d", h.cbytes, len(src))
	}
	if h.nbytes > 0 && (h.blocks <= 0 || h.blocks > maxBlockSize || h.typesize == 0) {
		return h, bad("blocksize %d, typesize %d", h.blocks, h.typesize)
	}
	return h, nil
}

// DecodedSize returns the frame's decoded size from its header.
func DecodedSize(src []byte) (int, error) {
	h, err := parseHeader(src)
	if err != nil {
		return 0, err
	}
	return h.nbytes, nil
}

// Decoder holds the state worth sharing between frames (a zstd decoder).
// It is safe for concurrent use; the zero value is ready.
type Decoder struct {
	once sync.Once
	zr   *zstd.Decoder
	zerr error
	tmp  sync.Pool // *[]byte scratch blocks for unshuffling
}

func (d *Decoder) zstd() (*zstd.Decoder, error) {
	d.once.Do(func() { d.zr, d.zerr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0)) })
	return d.zr, d.zerr
}

// Decode decodes one frame into dst (reused when its capacity suffices).
func Decode(dst, src []byte) ([]byte, error) {
	var d Decoder
	return d.DecodeLimit(dst, src, 1<<31-1)
}

// DecodeLimit decodes one frame, refusing frames that decode to more than
// max bytes.
func (d *Decoder) DecodeLimit(dst, src []byte, max int) ([]byte, error) {
	h, err := parseHeader(src)
	if err != nil {
		return nil, err
	}
	if h.nbytes > max {
		return nil, bad("frame decodes to %d bytes, limit %d", h.nbytes, max)
	}
	if cap(dst) >= h.nbytes {
		dst = dst[:h.nbytes]
	} else {
		dst = make([]byte, h.nbytes)
	}
	if h.nbytes == 0 {
		return dst, nil
	}
	if h.flags&flagMemcpy != 0 {
		if h.cbytes != h.nbytes+headerSize {
			return nil, bad("memcpyed frame of %d bytes for %d", h.cbytes, h.nbytes)
		}
		copy(dst, src[headerSize:])
		return dst, nil
	}
	nblocks := (h.nbytes + h.blocks - 1) / h.blocks
	if nblocks > (len(src)-headerSize)/4 {
		return nil, bad("%d blocks cannot fit in %d bytes", nblocks, len(src))
	}
	code := int(h.flags >> 5)
	if code > codeZstd {
		return nil, bad("unknown compressor code %d", code)
	}
	shuffled := h.flags&(flagShuffle|flagBitShuffle) != 0
	var tmp []byte
	if shuffled {
		// The pool holds *[]byte so that Get/Put move a pointer, not a
		// freshly boxed slice header: steady-state decoding allocates
		// nothing but the output.
		p, ok := d.tmp.Get().(*[]byte)
		if !ok || cap(*p) < h.blocks {
			b := make([]byte, h.blocks)
			p = &b
		}
		tmp = (*p)[:h.blocks]
		defer d.tmp.Put(p)
	}
	for b := 0; b < nblocks; b++ {
		bsize := h.blocks
		leftover := false
		if b == nblocks-1 && h.nbytes%h.blocks != 0 {
			bsize = h.nbytes % h.blocks
			leftover = true
		}
		start := int(int32(binary.LittleEndian.Uint32(src[headerSize+4*b:])))
		out := dst[b*h.blocks : b*h.blocks+bsize]
		target := out
		doShuffle := h.flags&flagShuffle != 0 && h.typesize > 1
		doBit := h.flags&flagBitShuffle != 0 && bsize >= h.typesize
		if doShuffle || doBit {
			target = tmp[:bsize]
		}
		if err := d.block(code, src, start, target, h, bsize, leftover); err != nil {
			return nil, fmt.Errorf("block %d: %w", b, err)
		}
		switch {
		case doShuffle:
			unshuffle(out, target, h.typesize)
		case doBit:
			bitunshuffle(out, target, h.typesize)
		}
	}
	return dst, nil
}

func (d *Decoder) block(code int, src []byte, off int, out []byte, h header, bsize int, leftover bool) error {
	nsplits := 1
	if h.flags&flagDontSplit == 0 && h.typesize <= maxSplits && bsize/h.typesize >= minBufferSize && !leftover {
		nsplits = h.typesize
	}
	neblock := bsize / nsplits
	for j := 0; j < nsplits; j++ {
		if off < headerSize || off > len(src)-4 {
			return bad("stream offset %d outside the frame", off)
		}
		cb := int(int32(binary.LittleEndian.Uint32(src[off:])))
		off += 4
		if cb < 0 || cb > len(src)-off {
			return bad("stream of %d bytes overruns the frame", cb)
		}
		in := src[off : off+cb]
		part := out[j*neblock : (j+1)*neblock]
		if cb == neblock {
			copy(part, in)
		} else if err := d.decompress(code, in, part); err != nil {
			return err
		}
		off += cb
	}
	return nil
}

func (d *Decoder) decompress(code int, in, out []byte) error {
	var n int
	var err error
	switch code {
	case codeBloscLZ:
		n, err = blosclzDecompress(in, out)
	case codeLZ4:
		n, err = lz4.UncompressBlock(in, out)
	case codeSnappy:
		var l int
		if l, err = snappy.DecodedLen(in); err == nil {
			if l != len(out) {
				return bad("snappy stream decodes to %d bytes, want %d", l, len(out))
			}
			var got []byte
			got, err = snappy.Decode(out, in)
			n = len(got)
		}
	case codeZlib:
		var r io.ReadCloser
		if r, err = zlib.NewReader(bytes.NewReader(in)); err == nil {
			n, err = io.ReadFull(r, out)
			if err == nil {
				var one [1]byte
				if m, _ := r.Read(one[:]); m > 0 {
					err = bad("zlib stream longer than the block")
				}
			}
			_ = r.Close()
		}
	case codeZstd:
		var zr *zstd.Decoder
		if zr, err = d.zstd(); err == nil {
			var got []byte
			got, err = zr.DecodeAll(in, out[:0])
			n = len(got)
			if err == nil && n == len(out) && n > 0 && &got[0] != &out[0] {
				copy(out, got)
			}
		}
	}
	if err != nil {
		var be *Error
		if errors.As(err, &be) {
			return err
		}
		return bad("inner codec: %v", err)
	}
	if n != len(out) {
		return bad("stream decodes to %d bytes, want %d", n, len(out))
	}
	return nil
}

// blosclzDecompress decodes a BloscLZ stream (a FastLZ level-1 variant):
// control bytes < 32 start literal runs of ctrl+1 bytes; larger ones are
// matches with a 3-bit length (7 = extended by 255-runs) and 13-bit
// distance (8191 + a 16-bit far distance).
func blosclzDecompress(in, out []byte) (int, error) {
	if len(in) == 0 {
		return 0, nil
	}
	const maxDistance = 8191
	ip, op := 0, 0
	ctrl := int(in[ip] & 31)
	ip++
	for {
		if ctrl >= 32 {
			length := (ctrl >> 5) - 1
			ofs := (ctrl & 31) << 8
			if length == 6 {
				for {
					if ip+1 >= len(in) {
						return 0, bad("blosclz: truncated match length")
					}
					code := int(in[ip])
					ip++
					length += code
					if code != 255 {
						break
					}
				}
			} else if ip+1 >= len(in) {
				return 0, bad("blosclz: truncated match")
			}
			code := int(in[ip])
			ip++
			length += 3
			ref := op - ofs - code
			if code == 255 && ofs == 31<<8 {
				if ip+1 >= len(in) {
					return 0, bad("blosclz: truncated far distance")
				}
				ofs = int(in[ip])<<8 | int(in[ip+1])
				ip += 2
				ref = op - ofs - maxDistance
			}
			if op+length > len(out) {
				return 0, bad("blosclz: match overruns the block")
			}
			if ref-1 < 0 {
				return 0, bad("blosclz: match before the start")
			}
			if ip >= len(in) {
				break
			}
			ctrl = int(in[ip])
			ip++
			ref--
			if ref == op-1 {
				b := out[ref]
				for i := 0; i < length; i++ {
					out[op+i] = b
				}
			} else if op-ref >= length {
				copy(out[op:op+length], out[ref:ref+length])
			} else {
				for i := 0; i < length; i++ {
					out[op+i] = out[ref+i]
				}
			}
			op += length
		} else {
			ctrl++
			if op+ctrl > len(out) || ip+ctrl > len(in) {
				return 0, bad("blosclz: literal run overruns")
			}
			copy(out[op:], in[ip:ip+ctrl])
			op += ctrl
			ip += ctrl
			if ip >= len(in) {
				break
			}
			ctrl = int(in[ip])
			ip++
		}
	}
	return op, nil
}

// unshuffle undoes the byte shuffle: src holds byte j of every element in
// stream j; trailing bytes that do not fill an element are copied.
func unshuffle(dst, src []byte, ts int) {
	n := len(src) / ts
	switch ts {
	case 4:
		s0, s1, s2, s3 := src[:n], src[n:2*n], src[2*n:3*n], src[3*n:4*n]
		d := dst[:4*n]
		for i := range s0 {
			binary.LittleEndian.PutUint32(d[4*i:], uint32(s0[i])|uint32(s1[i])<<8|uint32(s2[i])<<16|uint32(s3[i])<<24)
		}
	case 8:
		d := dst[:8*n]
		for j := 0; j < 8; j++ {
			s := src[j*n : (j+1)*n]
			for i, v := range s {
				d[8*i+j] = v
			}
		}
	default:
		for j := 0; j < ts; j++ {
			s := src[j*n : (j+1)*n]
			for i, v := range s {
				dst[i*ts+j] = v
			}
		}
	}
	copy(dst[n*ts:], src[n*ts:])
}

func shuffle(dst, src []byte, ts int) {
	n := len(src) / ts
	for j := 0; j < ts; j++ {
		d := dst[j*n : (j+1)*n]
		for i := range d {
			d[i] = src[i*ts+j]
		}
	}
	copy(dst[n*ts:], src[n*ts:])
}

// bitunshuffle undoes bitshuffle over elements of ts bytes: row r = 8·byte
// + bit holds that bit of every element, LSB first. Only whole groups of
// eight elements are transposed; as in C-Blosc, a block whose element count
// is not a multiple of 8 is stored plain. Each group of eight elements'
// byte j is one 8×8 bit-matrix transpose of the eight rows' bytes.
func bitunshuffle(dst, src []byte, ts int) {
	n := len(src) / ts
	if n%8 != 0 {
		copy(dst, src)
		return
	}
	rowLen := n / 8
	body := dst[:n*ts]
	for j := 0; j < ts; j++ {
		rows := src[j*8*rowLen : (j+1)*8*rowLen]
		for b := 0; b < rowLen; b++ {
			var x uint64
			for k := 0; k < 8; k++ {
				x |= uint64(rows[k*rowLen+b]) << (8 * k)
			}
			x = transpose8(x)
			out := body[8*b*ts+j:]
			for m := 0; m < 8; m++ {
				out[m*ts] = byte(x >> (8 * m))
			}
		}
	}
	copy(dst[n*ts:], src[n*ts:])
}

func bitshuffle(dst, src []byte, ts int) {
	n := len(src) / ts
	if n%8 != 0 {
		copy(dst, src)
		return
	}
	rowLen := n / 8
	for j := 0; j < ts; j++ {
		rows := dst[j*8*rowLen : (j+1)*8*rowLen]
		for b := 0; b < rowLen; b++ {
			in := src[8*b*ts+j:]
			var x uint64
			for m := 0; m < 8; m++ {
				x |= uint64(in[m*ts]) << (8 * m)
			}
			x = transpose8(x)
			for k := 0; k < 8; k++ {
				rows[k*rowLen+b] = byte(x >> (8 * k))
			}
		}
	}
	copy(dst[n*ts:], src[n*ts:])
}

// transpose8 transposes the 8×8 bit matrix whose row k is byte k of x
// (bit m of byte k moves to bit k of byte m), in three swap stages.
func transpose8(x uint64) uint64 {
	t := (x ^ x>>7) & 0x00AA00AA00AA00AA
	x ^= t ^ t<<7
	t = (x ^ x>>14) & 0x0000CCCC0000CCCC
	x ^= t ^ t<<14
	t = (x ^ x>>28) & 0x00000000F0F0F0F0
	return x ^ t ^ t<<28
}
