package zarr

import (
	"encoding/binary"
	"math/bits"
)

// zstdFrame is what scanZstd learns about one frame from its header and
// block headers, without decompressing (RFC 8878 §3.1.1).
type zstdFrame struct {
	start     int   // offset of the magic number
	headerEnd int   // offset of the first block header
	end       int   // offset just past the frame (checksum included)
	fhd       byte  // Frame_Header_Descriptor
	window    byte  // Window_Descriptor (0 for single-segment frames)
	fcs       int64 // declared content size, -1 when absent
}

const (
	zstdMagic     = 0xFD2FB528
	zstdBlockMax  = 128 << 10 // Block_Maximum_Size's upper bound
	zstdMinWindow = 1 << 10
)

// scanZstd walks the frames of b (skippable frames skipped) and returns
// them with the sum of their declared content sizes (-1 unless every frame
// declares one; 0 without frames). It checks what the headers promise against the bytes
// present: every block lies inside the input, and no frame declares more
// content than its blocks can hold (raw and RLE blocks their size, a
// compressed block at most min(window, 128 KiB)). So a frame of a few
// bytes cannot declare gigabytes.
func scanZstd(b []byte) ([]zstdFrame, int64, error) {
	var frames []zstdFrame
	total := int64(0)
	p := 0
	// Fewer than 4 trailing bytes cannot start a frame; the decoder
	// ignores them too.
	for len(b)-p >= 4 {
		magic := binary.LittleEndian.Uint32(b[p:])
		if magic&0xFFFFFFF0 == 0x184D2A50 { // skippable frame
			if len(b)-p < 8 {
				return nil, 0, corrupt("zstd: truncated skippable frame at byte %d", p)
			}
			n := uint64(binary.LittleEndian.Uint32(b[p+4:]))
			if n > uint64(len(b)-p-8) {
				return nil, 0, corrupt("zstd: skippable frame of %d bytes overruns the input", n)
			}
			p += 8 + int(n)
			continue
		}
		if magic != zstdMagic {
			return nil, 0, corrupt("zstd: bad magic %#x at byte %d", magic, p)
		}
		f, err := scanFrame(b, p)
		if err != nil {
			return nil, 0, err
		}
		frames = append(frames, f)
		if f.fcs < 0 || total < 0 {
			total = -1
		} else if total += f.fcs; total < 0 {
			return nil, 0, corrupt("zstd: declared content sizes overflow")
		}
		p = f.end
	}
	// No frame at all (empty input, skippable frames only) is no content,
	// as for the decoder.
	return frames, total, nil
}

func scanFrame(b []byte, start int) (zstdFrame, error) {
	f := zstdFrame{start: start, fcs: -1}
	p := start + 4
	if p >= len(b) {
		return f, corrupt("zstd: truncated frame header")
	}
	f.fhd = b[p]
	p++
	if f.fhd&0x08 != 0 {
		return f, corrupt("zstd: reserved bit set in the frame header")
	}
	single := f.fhd&0x20 != 0
	var window uint64
	if !single {
		if p >= len(b) {
			return f, corrupt("zstd: truncated frame header")
		}
		f.window = b[p]
		p++
		base := uint64(1) << (10 + f.window>>3)
		window = base + base/8*uint64(f.window&7)
	}
	dictLen := [4]int{0, 1, 2, 4}[f.fhd&3]
	fcsLen := [4]int{0, 2, 4, 8}[f.fhd>>6]
	if single && fcsLen == 0 {
		fcsLen = 1
	}
	if len(b)-p < dictLen+fcsLen {
		return f, corrupt("zstd: truncated frame header")
	}
	p += dictLen
	if fcsLen > 0 {
		var v uint64
		for i := fcsLen - 1; i >= 0; i-- {
			v = v<<8 | uint64(b[p+i])
		}
		if fcsLen == 2 {
			v += 256
		}
		if v > 1<<62 {
			return f, corrupt("zstd: frame declares %d bytes", v)
		}
		f.fcs = int64(v)
		p += fcsLen
	}
	if single {
		window = max(uint64(f.fcs), zstdMinWindow)
	}
	f.headerEnd = p
	blockMax := int64(min(window, zstdBlockMax))
	var bound int64
	for {
		if len(b)-p < 3 {
			return f, corrupt("zstd: truncated block header at byte %d", p)
		}
		h := uint32(b[p]) | uint32(b[p+1])<<8 | uint32(b[p+2])<<16
		p += 3
		size := int(h >> 3)
		switch h >> 1 & 3 {
		case 0: // raw
			bound += int64(size)
		case 1: // RLE: one byte repeated size times
			bound += int64(size)
			size = 1
		case 2: // compressed
			bound += blockMax
		default:
			return f, corrupt("zstd: reserved block type at byte %d", p-3)
		}
		if size > len(b)-p {
			return f, corrupt("zstd: block of %d bytes overruns the input", size)
		}
		p += size
		if h&1 != 0 {
			break
		}
	}
	if f.fhd&0x04 != 0 { // content checksum
		if len(b)-p < 4 {
			return f, corrupt("zstd: truncated content checksum")
		}
		p += 4
	}
	if f.fcs > bound {
		return f, corrupt("zstd: frame declares %d bytes, its blocks hold at most %d", f.fcs, bound)
	}
	f.end = p
	return f, nil
}

// stripContentSizes rewrites every frame header of b without its content
// size, so that the decoder cannot size its output from it: the output then
// grows with what the frames really produce. A single-segment frame gets a
// window descriptor covering its declared size (back-references may reach
// its first byte). The blocks and checksums are copied unchanged.
func stripContentSizes(b []byte, frames []zstdFrame) []byte {
	out := make([]byte, 0, len(b)+len(frames))
	p := 0
	for _, f := range frames {
		out = append(out, b[p:f.start+4]...) // skippable frames before it, magic
		fhd := f.fhd & 0x07                  // checksum and dictionary-id flags
		wd := f.window
		if f.fhd&0x20 != 0 {
			// The smallest power of two >= the content size: exponent
			// log2 - 10, mantissa 0.
			// Callers strip only sizes they accept (far below the
			// descriptor's 2^41 limit).
			log := min(max(bits.Len64(uint64(max(f.fcs, zstdMinWindow))-1), 10), 41)
			wd = byte(log-10) << 3
		}
		out = append(out, fhd, wd)
		dictStart := f.start + 5
		if f.fhd&0x20 == 0 {
			dictStart++
		}
		out = append(out, b[dictStart:dictStart+[4]int{0, 1, 2, 4}[f.fhd&3]]...)
		out = append(out, b[f.headerEnd:f.end]...)
		p = f.end
	}
	return append(out, b[p:]...)
}
