// Package blosc reads and writes C-Blosc1 frames (the format numcodecs and
// zarr-python's "blosc" codec produce): a 16-byte header, a block-start
// table, and per block one stream or typesize split streams compressed
// with blosclz, lz4/lz4hc, zlib, zstd or snappy, then byte- or
// bit-unshuffled. Memcpyed frames carry the data raw after the header.
//
// Every size in the header, the block table and every stream's extent are
// checked against the frame and the caller's limit before anything is
// allocated, and each stream must be long enough to produce its block at
// its compressor's largest possible expansion: a header alone can never
// size an allocation.
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

// Decoder holds the state worth sharing between frames (a zstd decoder,
// zlib readers, unshuffle scratch). It is safe for concurrent use; the
// zero value is ready.
type Decoder struct {
	once sync.Once
	zr   *zstd.Decoder
	zerr error
	tmp  sync.Pool // *[]byte scratch blocks for unshuffling
	zlib sync.Pool // *zlibReader
}

func (d *Decoder) zstd() (*zstd.Decoder, error) {
	// DecodeAll must never allocate beyond the block it decodes into:
	// without the cap limit it would allocate whatever content size a
	// stream's frame header declares.
	d.once.Do(func() {
		d.zr, d.zerr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecodeAllCapLimit(true))
	})
	return d.zr, d.zerr
}

// zlibReader is a reusable zlib stream reader: a fresh one per stream
// would allocate its 32 KiB window for every few bytes of input.
type zlibReader struct {
	src bytes.Reader
	z   io.ReadCloser
}

// Decode decodes one frame into dst (reused when its capacity suffices).
func Decode(dst, src []byte) ([]byte, error) {
	var d Decoder
	return d.DecodeLimit(dst, src, 1<<31-1)
}

// MaxExpansion is the most one compressed byte can decode to with the
// compressor of a frame whose flags byte (header byte 2) is flags: the
// largest expansion its format allows (a BloscLZ or LZ4 match grows by 255
// bytes per extra length byte, snappy copies 64 bytes from 3, deflate at
// most 1032:1, and a 4-byte zstd RLE block holds 128 KiB). Memcpyed frames
// do not expand. Decoding never allocates more than a frame's stream bytes
// times this (twice that while the output grows), plus a small constant.
func MaxExpansion(flags byte) int {
	if flags&flagMemcpy != 0 {
		return 1
	}
	switch int(flags >> 5) {
	case codeBloscLZ, codeLZ4:
		return 256
	case codeSnappy:
		return 32
	case codeZlib:
		return 1040
	case codeZstd:
		return 32768
	}
	return 0
}

// DecodeLimit decodes one frame, refusing frames that decode to more than
// max bytes. When dst has room for the frame's declared size it is decoded
// in place; otherwise the output grows block by block with what the
// frame really decodes to, so a frame that fails part-way has cost little.
func (d *Decoder) DecodeLimit(dst, src []byte, max int) ([]byte, error) {
	h, err := parseHeader(src)
	if err != nil {
		return nil, err
	}
	if h.nbytes > max {
		return nil, bad("frame decodes to %d bytes, limit %d", h.nbytes, max)
	}
	if h.nbytes == 0 {
		return dst[:0], nil
	}
	if h.flags&flagMemcpy != 0 {
		if h.cbytes != h.nbytes+headerSize {
			return nil, bad("memcpyed frame of %d bytes for %d", h.cbytes, h.nbytes)
		}
		return append(dst[:0], src[headerSize:]...), nil
	}
	nblocks := (h.nbytes + h.blocks - 1) / h.blocks
	if nblocks > (len(src)-headerSize)/4 {
		return nil, bad("%d blocks cannot fit in %d bytes", nblocks, len(src))
	}
	code := int(h.flags >> 5)
	if code > codeZstd {
		return nil, bad("unknown compressor code %d", code)
	}
	if err := h.checkStreams(src, code, nblocks); err != nil {
		return nil, err
	}
	inPlace := cap(dst) >= h.nbytes
	if inPlace {
		dst = dst[:h.nbytes]
	} else {
		dst = dst[:0]
	}
	shuffled := h.flags&(flagShuffle|flagBitShuffle) != 0
	var tmp []byte
	if shuffled {
		// The largest block, not the declared block size: a frame of a
		// few bytes may declare 700 MB blocks.
		size := min(h.blocks, h.nbytes)
		// The pool holds *[]byte so that Get/Put move a pointer, not a
		// freshly boxed slice header: steady-state decoding allocates
		// nothing but the output.
		p, ok := d.tmp.Get().(*[]byte)
		if !ok || cap(*p) < size {
			b := make([]byte, size)
			p = &b
		}
		tmp = (*p)[:size]
		defer d.tmp.Put(p)
	}
	for b := 0; b < nblocks; b++ {
		bsize, leftover := h.block(b, nblocks)
		if !inPlace {
			dst = grow(dst, b*h.blocks+bsize, h.nbytes)
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

// grow returns dst extended to n bytes, reallocating (doubling, at most to
// total) only when its capacity is short.
func grow(dst []byte, n, total int) []byte {
	if n <= cap(dst) {
		return dst[:n]
	}
	out := make([]byte, n, min(total, max(n, 2*cap(dst))))
	copy(out, dst)
	return out
}

// block returns the size of block b of nblocks and whether it is the
// short last block.
func (h header) block(b, nblocks int) (size int, leftover bool) {
	if b == nblocks-1 && h.nbytes%h.blocks != 0 {
		return h.nbytes % h.blocks, true
	}
	return h.blocks, false
}

// splits is the number of streams a block of bsize bytes is stored in.
func (h header) splits(bsize int, leftover bool) int {
	if h.flags&flagDontSplit == 0 && h.typesize <= maxSplits && bsize/h.typesize >= minBufferSize && !leftover {
		return h.typesize
	}
	return 1
}

// checkStreams walks the block table and every stream without
// decompressing anything: each stream must lie inside the frame and be
// long enough to decode to its share of the block. What the decoder then
// allocates is bounded by the frame's own bytes, not by its header.
func (h header) checkStreams(src []byte, code, nblocks int) error {
	for b := 0; b < nblocks; b++ {
		bsize, leftover := h.block(b, nblocks)
		nsplits := h.splits(bsize, leftover)
		if bsize%nsplits != 0 {
			return bad("block %d: %d bytes do not split into %d streams", b, bsize, nsplits)
		}
		neblock := bsize / nsplits
		off := int(int32(binary.LittleEndian.Uint32(src[headerSize+4*b:])))
		for j := 0; j < nsplits; j++ {
			if off < headerSize || off > len(src)-4 {
				return bad("block %d: stream offset %d outside the frame", b, off)
			}
			cb := int(int32(binary.LittleEndian.Uint32(src[off:])))
			off += 4
			if cb < 0 || cb > len(src)-off {
				return bad("block %d: stream of %d bytes overruns the frame", b, cb)
			}
			if cb != neblock && cb*MaxExpansion(h.flags) < neblock {
				return bad("block %d: a stream of %d bytes cannot decode to %d bytes", b, cb, neblock)
			}
			off += cb
		}
	}
	return nil
}

func (d *Decoder) block(code int, src []byte, off int, out []byte, h header, bsize int, leftover bool) error {
	nsplits := h.splits(bsize, leftover)
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
		n, err = d.inflate(in, out)
	case codeZstd:
		var zr *zstd.Decoder
		if zr, err = d.zstd(); err == nil {
			var got []byte
			// The capacity is the block's: the decoder may not write
			// past it, nor allocate for a larger declared size.
			got, err = zr.DecodeAll(in, out[:0:len(out)])
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

// inflate decodes one zlib stream that must fill out exactly.
func (d *Decoder) inflate(in, out []byte) (int, error) {
	zr, _ := d.zlib.Get().(*zlibReader)
	if zr == nil {
		zr = &zlibReader{}
	}
	defer d.zlib.Put(zr)
	zr.src.Reset(in)
	var err error
	if zr.z == nil {
		zr.z, err = zlib.NewReader(&zr.src)
	} else {
		err = zr.z.(zlib.Resetter).Reset(&zr.src, nil)
	}
	if err != nil {
		return 0, err
	}
	n, err := io.ReadFull(zr.z, out)
	if err == nil {
		// Reading on to the end also verifies the Adler-32 checksum.
		var one [1]byte
		switch m, rerr := zr.z.Read(one[:]); {
		case m > 0:
			err = bad("zlib stream longer than the block")
		case rerr != io.EOF:
			err = rerr
		}
	}
	return n, err
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
