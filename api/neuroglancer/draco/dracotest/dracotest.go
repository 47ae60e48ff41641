// Package dracotest is a small Draco decoder for tests, written from the
// bitstream spec (and the reference decoder's checks) independently of the
// encoder in package draco: it reads the sequential mesh subset that encoder
// writes (coded indices, raw or tagged symbols, generic or integer
// attributes, with or without the difference prediction), so fuzz targets
// and table tests need no external tool. draco_decoder and draco3d check
// the same streams in draco's external tests. It imports nothing of the
// project.
package dracotest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// Decoded is one decoded stream, with how it was coded.
type Decoded struct {
	NumPoints  int
	Faces      []uint32
	Positions  []uint32 // int32 values, as their bits
	DataType   byte
	Components byte
	ConnMethod byte   // 0: coded indices (1 would be plain)
	Padding    int    // zero bytes after the attribute
	Schemes    []byte // symbol scheme of each coded stream, in order
	AttrCoder  byte   // sequential attribute decoder type
}

type reader struct {
	b   []byte
	pos int
}

var errShort = errors.New("short buffer")

func (r *reader) remaining() int { return len(r.b) - r.pos }

func (r *reader) bytes(n int) ([]byte, error) {
	if n < 0 || n > r.remaining() {
		return nil, errShort
	}
	s := r.b[r.pos : r.pos+n]
	r.pos += n
	return s, nil
}

func (r *reader) u8() (byte, error) {
	s, err := r.bytes(1)
	if err != nil {
		return 0, err
	}
	return s[0], nil
}

func (r *reader) u32() (uint32, error) {
	s, err := r.bytes(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(s), nil
}

// varint reads LEB128 (the spec's varUI32/varUI64) of at most maxBytes bytes.
func (r *reader) varint(maxBytes int) (uint64, error) {
	var v uint64
	for i := 0; i < maxBytes; i++ {
		c, err := r.u8()
		if err != nil {
			return 0, err
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return v, nil
		}
	}
	return 0, errors.New("varint too long")
}

// Decode decodes b, a version 2.2 sequential Draco mesh with one int32
// position attribute, checking what the reference decoder checks.
func Decode(b []byte) (*Decoded, error) {
	r := &reader{b: b}
	head, err := r.bytes(11)
	if err != nil {
		return nil, err
	}
	if string(head[:5]) != "DRACO" || head[5] != 2 || head[6] != 2 || head[7] != 1 || head[8] != 0 {
		return nil, fmt.Errorf("header % x: not a version 2.2 sequential mesh", head)
	}
	if flags := binary.LittleEndian.Uint16(head[9:]); flags != 0 {
		return nil, fmt.Errorf("flags %#x", flags)
	}
	nf, err := r.varint(5)
	if err != nil {
		return nil, err
	}
	np, err := r.varint(5)
	if err != nil {
		return nil, err
	}
	// The reference decoder's guard, which the encoder must satisfy.
	if nf > uint64(r.remaining())/3 {
		return nil, fmt.Errorf("%d faces in %d bytes", nf, r.remaining())
	}
	d := &Decoded{NumPoints: int(np)}
	afterCounts := r.pos
	if d.ConnMethod, err = r.u8(); err != nil {
		return nil, err
	}
	switch d.ConnMethod {
	case 0:
		syms, err := d.symbols(r, int(3*nf), 1)
		if err != nil {
			return nil, fmt.Errorf("indices: %w", err)
		}
		d.Faces = make([]uint32, len(syms))
		last := int64(0)
		for i, s := range syms {
			diff := int64(s >> 1)
			if s&1 != 0 {
				diff = -diff
			}
			last += diff
			if last < 0 || last >= int64(np) {
				return nil, fmt.Errorf("index %d out of range", last)
			}
			d.Faces[i] = uint32(last)
		}
	default:
		return nil, fmt.Errorf("connectivity method %d", d.ConnMethod)
	}
	if err := d.attributes(r); err != nil {
		return nil, fmt.Errorf("attributes: %w", err)
	}
	// Bytes past the attribute are padding up to the decoder's guard of 3
	// per face: zeros, and only as many as the guard needs.
	if r.remaining() > 0 {
		d.Padding = r.remaining()
		if len(b)-afterCounts != 3*int(nf) {
			return nil, fmt.Errorf("%d bytes after the attribute, %d after the counts for %d faces", r.remaining(), len(b)-afterCounts, nf)
		}
		for _, c := range b[r.pos:] {
			if c != 0 {
				return nil, fmt.Errorf("padding byte %#x", c)
			}
		}
	}
	return d, nil
}

func (d *Decoded) attributes(r *reader) error {
	n, err := r.u8()
	if err != nil || n != 1 {
		return fmt.Errorf("attribute decoders %d, %v", n, err)
	}
	na, err := r.varint(5)
	if err != nil || na != 1 {
		return fmt.Errorf("attributes %d, %v", na, err)
	}
	h, err := r.bytes(4)
	if err != nil {
		return err
	}
	if h[0] != 0 || h[3] != 0 {
		return fmt.Errorf("attribute type %d normalized %d", h[0], h[3])
	}
	d.DataType, d.Components = h[1], h[2]
	if d.DataType != 5 || d.Components != 3 {
		return fmt.Errorf("data type %d with %d components", d.DataType, d.Components)
	}
	if _, err := r.varint(5); err != nil { // unique id
		return err
	}
	if d.AttrCoder, err = r.u8(); err != nil {
		return err
	}
	nv := d.NumPoints * 3
	switch d.AttrCoder {
	case 0: // generic: raw values
		raw, err := r.bytes(4 * nv)
		if err != nil {
			return err
		}
		d.Positions = make([]uint32, nv)
		for i := range d.Positions {
			d.Positions[i] = binary.LittleEndian.Uint32(raw[4*i:])
		}
		return nil
	case 1: // integer
	default:
		return fmt.Errorf("attribute decoder type %d", d.AttrCoder)
	}
	pred, err := r.u8()
	if err != nil {
		return err
	}
	if int8(pred) != -2 {
		tr, err := r.u8()
		if err != nil {
			return err
		}
		if pred != 0 || tr != 1 {
			return fmt.Errorf("prediction %d transform %d", int8(pred), tr)
		}
	}
	compressed, err := r.u8()
	if err != nil {
		return err
	}
	var vals []uint32
	if compressed != 0 {
		if vals, err = d.symbols(r, nv, 3); err != nil {
			return err
		}
	} else {
		width, err := r.u8()
		if err != nil || width == 0 || width > 4 {
			return fmt.Errorf("value width %d, %v", width, err)
		}
		raw, err := r.bytes(int(width) * nv)
		if err != nil {
			return err
		}
		vals = make([]uint32, nv)
		for i := range vals {
			var v uint32
			for k := range int(width) {
				v |= uint32(raw[i*int(width)+k]) << (8 * k)
			}
			vals[i] = v
		}
	}
	signed := make([]int32, nv)
	for i, v := range vals {
		if v&1 == 0 {
			signed[i] = int32(v >> 1)
		} else {
			signed[i] = -int32(v>>1) - 1
		}
	}
	d.Positions = make([]uint32, nv)
	if int8(pred) == -2 {
		for i, v := range signed {
			d.Positions[i] = uint32(v)
		}
		return nil
	}
	lo32, err := r.u32()
	if err != nil {
		return err
	}
	hi32, err := r.u32()
	if err != nil {
		return err
	}
	lo, hi := int64(int32(lo32)), int64(int32(hi32))
	if lo > hi {
		return fmt.Errorf("wrap bounds %d > %d", lo, hi)
	}
	span := hi - lo + 1
	for i, c := range signed {
		p := int64(0)
		if i >= 3 {
			p = int64(int32(d.Positions[i-3]))
		}
		p = min(max(p, lo), hi)
		v := p + int64(c)
		if v > hi {
			v -= span
		} else if v < lo {
			v += span
		}
		d.Positions[i] = uint32(int32(v))
	}
	return nil
}

// symbols reads one coded stream of n values in groups of comps.
func (d *Decoded) symbols(r *reader, n, comps int) ([]uint32, error) {
	if n == 0 {
		return nil, nil
	}
	scheme, err := r.u8()
	if err != nil {
		return nil, err
	}
	d.Schemes = append(d.Schemes, scheme)
	out := make([]uint32, 0, n)
	switch scheme {
	case 0: // tagged
		dec, err := newRansDecoder(r, 12)
		if err != nil {
			return nil, err
		}
		bits := bitReader{b: r.b[r.pos:]}
		for len(out) < n {
			t, err := dec.read()
			if err != nil {
				return nil, err
			}
			if t > 32 {
				return nil, fmt.Errorf("bit length %d", t)
			}
			for range comps {
				v, err := bits.read(int(t))
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
		}
		if err := dec.done(); err != nil {
			return nil, err
		}
		r.pos += (bits.n + 7) / 8
	case 1: // raw
		b, err := r.u8()
		if err != nil {
			return nil, err
		}
		if b < 1 || b > 18 {
			return nil, fmt.Errorf("raw bit length %d", b)
		}
		dec, err := newRansDecoder(r, min(max(3*int(b)/2, 12), 20))
		if err != nil {
			return nil, err
		}
		for len(out) < n {
			v, err := dec.read()
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		if err := dec.done(); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("symbol scheme %d", scheme)
	}
	return out, nil
}

type ransDecoder struct {
	prec  int
	prob  []uint32
	cum   []uint32 // cum[i] = Σ prob[:i], len(prob)+1 entries
	buf   []byte
	off   int
	state uint64
}

// newRansDecoder reads a frequency table and the coded bytes behind it.
func newRansDecoder(r *reader, prec int) (*ransDecoder, error) {
	k, err := r.varint(5)
	if err != nil {
		return nil, err
	}
	if k == 0 || k/64 > uint64(r.remaining()) {
		return nil, fmt.Errorf("%d symbols", k)
	}
	d := &ransDecoder{prec: prec, prob: make([]uint32, k)}
	for i := uint64(0); i < k; i++ {
		c, err := r.u8()
		if err != nil {
			return nil, err
		}
		if c&3 == 3 {
			run := uint64(c>>2) + 1
			if i+run > k {
				return nil, errors.New("zero run past the table")
			}
			i += run - 1
			continue
		}
		p := uint32(c >> 2)
		for j := range int(c & 3) {
			e, err := r.u8()
			if err != nil {
				return nil, err
			}
			p |= uint32(e) << (8*(j+1) - 2)
		}
		d.prob[i] = p
	}
	d.cum = make([]uint32, k+1)
	for i, p := range d.prob {
		d.cum[i+1] = d.cum[i] + p
	}
	if d.cum[k] != 1<<prec {
		return nil, fmt.Errorf("probabilities sum to %d, not %d", d.cum[k], 1<<prec)
	}
	size, err := r.varint(10)
	if err != nil {
		return nil, err
	}
	if size > uint64(r.remaining()) || size == 0 {
		return nil, fmt.Errorf("%d coded bytes", size)
	}
	d.buf, _ = r.bytes(int(size))
	last := d.buf[size-1]
	nb := int(last>>6) + 1
	if nb > len(d.buf) {
		return nil, errShort
	}
	d.off = len(d.buf) - nb
	var x uint64
	for i := nb - 1; i >= 0; i-- {
		x = x<<8 | uint64(d.buf[d.off+i])
	}
	x &^= uint64(3) << (8*nb - 2)
	d.state = x + 4<<prec
	if d.state >= 4<<prec*256 {
		return nil, errors.New("initial state too large")
	}
	return d, nil
}

func (d *ransDecoder) read() (uint32, error) {
	base := uint64(4) << d.prec
	for d.state < base && d.off > 0 {
		d.off--
		d.state = d.state<<8 | uint64(d.buf[d.off])
	}
	quo, rem := d.state>>d.prec, d.state&(1<<d.prec-1)
	s := sort.Search(len(d.prob), func(i int) bool { return uint64(d.cum[i+1]) > rem })
	if s == len(d.prob) {
		return 0, errors.New("no symbol")
	}
	d.state = quo*uint64(d.prob[s]) + rem - uint64(d.cum[s])
	return uint32(s), nil
}

// done checks the stream ended where the encoder began: with the bytes the
// encoder shifted out before its first symbol read back, every byte read and
// the state back at its start.
func (d *ransDecoder) done() error {
	for d.state < 4<<d.prec && d.off > 0 {
		d.off--
		d.state = d.state<<8 | uint64(d.buf[d.off])
	}
	if d.off != 0 || d.state != 4<<d.prec {
		return fmt.Errorf("rANS stream not exhausted: %d bytes left, state %d", d.off, d.state)
	}
	return nil
}

type bitReader struct {
	b []byte
	n int // bits read
}

func (br *bitReader) read(k int) (uint32, error) {
	if br.n+k > 8*len(br.b) {
		return 0, errShort
	}
	var v uint32
	for i := range k {
		bit := br.b[(br.n+i)/8] >> ((br.n + i) % 8) & 1
		v |= uint32(bit) << i
	}
	br.n += k
	return v, nil
}
