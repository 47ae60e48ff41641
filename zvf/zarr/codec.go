package zarr

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/bits"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/zvfserve/zvfserve/vlen"
	"github.com/zvfserve/zvfserve/zvf/zarr/blosc"
)

// Chunk is one decoded chunk (or whole array): Data holds fixed-size
// elements little-endian in C order; Elems holds variable-length elements.
type Chunk struct {
	Shape []int64
	Type  DataType
	Data  []byte
	Elems [][]byte
}

// Len is the number of elements.
func (c *Chunk) Len() int64 { return prod(c.Shape) }

func prod(s []int64) int64 {
	n := int64(1)
	for _, v := range s {
		n *= v
	}
	return n
}

// rep is what a codec sees: the shape, type and fill value of its input
// array when decoding runs backwards through the chain.
type rep struct {
	shape []int64
	typ   DataType
	fill  []byte
}

type arrayToArray interface {
	name() string
	// out returns the representation this codec encodes to.
	out(in rep) (rep, error)
	decode(c *Chunk, in rep) (*Chunk, error)
	encode(c *Chunk) (*Chunk, error)
}

type arrayToBytes interface {
	name() string
	decode(b []byte, r rep) (*Chunk, error)
	encode(c *Chunk, r rep) ([]byte, error)
	// encodedSize is the exact encoded size when known (else -1): it bounds
	// the bytes→bytes decoders' output.
	encodedSize(r rep) int64
}

type bytesToBytes interface {
	name() string
	decode(b []byte, size outSize) ([]byte, error)
	encode(b []byte) ([]byte, error)
}

// outSize is what a bytes→bytes decoder may produce: exactly exact bytes
// when the metadata fixes the size (exact >= 0; the output is then
// allocated once, up front), else at most max bytes in a buffer that grows
// only with output actually produced — never from a size a header claims.
type outSize struct {
	exact, max int64
}

// upTo is an outSize of unknown length.
func upTo(max int64) outSize { return outSize{exact: -1, max: max} }

// Codecs holds the expensive, shareable codec state (zstd decoders) and the
// allocation limits for every array opened with it. Safe for concurrent
// use; make one per process or server and pass it to OpenArray.
type Codecs struct {
	lim      Limits
	zdecOnce sync.Once
	zdec     *zstd.Decoder
	zdecErr  error
	zencMu   sync.Mutex
	zenc     map[int]*zstd.Encoder
	blosc    blosc.Decoder
}

// Limits bound what reading an array may allocate. Zero fields take the
// defaults.
type Limits struct {
	// MaxChunkBytes bounds one decoded chunk: elements × item size (for
	// variable-length types 24 bytes an element, its slice header, plus
	// the element bytes). It applies to every chunk a codec chain decodes —
	// a shard, its inner chunks and its index — and is checked when the
	// array is opened, so a chunk is never allocated from a size the
	// metadata merely claims. Decodes whose output size the metadata does
	// not fix (variable-length data, the bytes a sharding codec reads)
	// stop once they produce more than this. Default 256 MiB.
	MaxChunkBytes int64
	// MaxReadBytes bounds Array.Read, which decodes a whole array into one
	// buffer. Default 1 GiB.
	MaxReadBytes int64
}

// Default limits.
const (
	DefaultMaxChunkBytes = 256 << 20
	DefaultMaxReadBytes  = 1 << 30
)

// NewCodecs returns a codec environment with the given limits (none: the
// defaults; with several, later non-zero fields win).
func NewCodecs(limits ...Limits) *Codecs {
	cs := &Codecs{lim: Limits{MaxChunkBytes: DefaultMaxChunkBytes, MaxReadBytes: DefaultMaxReadBytes}}
	for _, l := range limits {
		if l.MaxChunkBytes > 0 {
			cs.lim.MaxChunkBytes = l.MaxChunkBytes
		}
		if l.MaxReadBytes > 0 {
			cs.lim.MaxReadBytes = l.MaxReadBytes
		}
	}
	return cs
}

// elemBytes is what one element of t costs decoded: its size, or for the
// variable-length types the []byte header that holds it.
func elemBytes(t DataType) int64 {
	if t.Variable() {
		return int64(unsafe.Sizeof([]byte(nil)))
	}
	return int64(t.Size)
}

// sizeBytes is elements(shape) × elemBytes(t), or ok false when that
// exceeds limit (elems -1: the element count overflows int64, or a
// dimension is negative).
func sizeBytes(shape []int64, t DataType, limit int64) (elems, bytes int64, ok bool) {
	elems = 1
	for _, v := range shape {
		if v < 0 {
			return -1, 0, false
		}
		hi, lo := bits.Mul64(uint64(elems), uint64(v))
		if hi != 0 || lo > math.MaxInt64 {
			return -1, 0, false
		}
		elems = int64(lo)
	}
	size := elemBytes(t)
	if size > 0 && elems > limit/size {
		return elems, 0, false
	}
	return elems, elems * size, true
}

// checkRep refuses a representation whose decoded chunk would exceed
// MaxChunkBytes: what is allocated for it later (the fill chunk, a
// decoder's output) is then bounded by the limit, whatever a chunk's
// bytes claim.
func (cs *Codecs) checkRep(what string, r rep) error {
	for _, v := range r.shape {
		if v < 0 {
			return metaErr("%s shape %v is negative", what, r.shape)
		}
	}
	elems, _, ok := sizeBytes(r.shape, r.typ, cs.lim.MaxChunkBytes)
	switch {
	case ok:
		return nil
	case elems < 0:
		return tooLarge("%s of shape %v has more than 2^63 elements", what, r.shape)
	}
	return tooLarge("%s of %d elements × %d bytes exceeds the %d-byte limit", what, elems, elemBytes(r.typ), cs.lim.MaxChunkBytes)
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

// pipeline is a resolved codec chain for one array.
type pipeline struct {
	aa    []arrayToArray
	aaIn  []rep // input representation of each aa codec
	ab    arrayToBytes
	abIn  rep
	bb    []bytesToBytes
	specs []CodecSpec
	// maxOut bounds the bytes→bytes outputs whose size the metadata does
	// not fix: MaxChunkBytes.
	maxOut int64
}

// build resolves a codec chain whose decoded chunks have representation
// in; what names that chunk in errors.
func (cs *Codecs) build(what string, specs []CodecSpec, in rep) (*pipeline, error) {
	p := &pipeline{specs: specs, maxOut: cs.lim.MaxChunkBytes}
	// Before any codec is made: codecs size their own tables (a shard
	// index, a vlen index) from the shape.
	if err := cs.checkRep(what, in); err != nil {
		return nil, err
	}
	cur := in
	i := 0
	for ; i < len(specs); i++ {
		c, err := cs.newCodec(specs[i], cur)
		if err != nil {
			return nil, err
		}
		switch {
		case c.aa != nil:
			if p.ab != nil {
				return nil, metaErr("codec %s (array→array) after the array→bytes codec", specs[i].Name)
			}
			o, err := c.aa.out(cur)
			if err != nil {
				return nil, err
			}
			if err := cs.checkRep(what+" (encoded by "+specs[i].Name+")", o); err != nil {
				return nil, err
			}
			p.aa = append(p.aa, c.aa)
			p.aaIn = append(p.aaIn, cur)
			cur = o
		case c.ab != nil:
			if p.ab != nil {
				return nil, metaErr("more than one array→bytes codec")
			}
			p.ab = c.ab
			p.abIn = cur
		default:
			if p.ab == nil {
				return nil, metaErr("codec %s (bytes→bytes) before the array→bytes codec", specs[i].Name)
			}
			p.bb = append(p.bb, c.bb)
		}
	}
	if p.ab == nil {
		return nil, metaErr("codec chain has no array→bytes codec")
	}
	return p, nil
}

// resolved is one codec of a chain: exactly one field is set, by the
// codec's kind.
type resolved struct {
	aa arrayToArray
	ab arrayToBytes
	bb bytesToBytes
}

// newCodec resolves one codec spec for input in.
func (cs *Codecs) newCodec(s CodecSpec, in rep) (resolved, error) {
	switch s.Name {
	case "bytes":
		c, err := newBytesCodec(s.Configuration, in)
		return resolved{ab: c}, err
	case "vlen-bytes", "vlen-utf8":
		if !in.typ.Variable() {
			return resolved{}, metaErr("codec %s needs a variable-length data type, have %s", s.Name, in.typ.Name)
		}
		return resolved{ab: &vlenCodec{codecName: s.Name, layout: vlen.VlenBytes{UTF8: s.Name == "vlen-utf8"}}}, nil
	case "zarrs.vlen", "https://codec.zarrs.dev/array_to_bytes/vlen":
		c, err := cs.newZarrsVlen(s.Name, s.Configuration, in)
		if err != nil {
			return resolved{}, err
		}
		return resolved{ab: c}, nil
	case "transpose":
		c, err := newTranspose(s.Configuration, in)
		if err != nil {
			return resolved{}, err
		}
		return resolved{aa: c}, nil
	case "zstd":
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
	case "gzip":
		var cfg struct {
			Level int `json:"level"`
		}
		if len(s.Configuration) > 0 {
			if err := json.Unmarshal(s.Configuration, &cfg); err != nil {
				return resolved{}, metaErr("gzip configuration: %v", err)
			}
		}
		if cfg.Level < 0 || cfg.Level > 9 {
			return resolved{}, metaErr("gzip level %d", cfg.Level)
		}
		return resolved{bb: gzipCodec{level: cfg.Level}}, nil
	case "crc32c":
		return resolved{bb: crc32cCodec{}}, nil
	case "scale_offset":
		c, err := newScaleOffset(s.Configuration, in)
		if err != nil {
			return resolved{}, err
		}
		return resolved{aa: c}, nil
	case "cast_value":
		c, err := newCastValue(s.Configuration, in)
		if err != nil {
			return resolved{}, err
		}
		return resolved{aa: c}, nil
	case "sharding_indexed":
		c, err := cs.newSharding(s.Configuration, in)
		if err != nil {
			return resolved{}, err
		}
		return resolved{ab: c}, nil
	case "blosc":
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
	return resolved{}, unsupported("codec %q", s.Name)
}

// decode runs the chain backwards over one stored chunk.
func (p *pipeline) decode(b []byte) (*Chunk, error) {
	final := p.ab.encodedSize(p.abIn)
	for i := len(p.bb) - 1; i >= 0; i-- {
		// Only the codec next to the array→bytes codec can have an exact
		// output size; the others are bounded by a generous expansion of
		// the final size (or of MaxChunkBytes when that is not fixed).
		size := upTo(maxExpand(int64(len(b)), final, p.maxOut))
		if i == 0 && final >= 0 {
			size = outSize{exact: final, max: final}
		}
		out, err := p.bb[i].decode(b, size)
		if err != nil {
			return nil, &Error{Codec: p.bb[i].name(), Err: err}
		}
		b = out
	}
	c, err := p.ab.decode(b, p.abIn)
	if err != nil {
		return nil, &Error{Codec: p.ab.name(), Err: err}
	}
	for i := len(p.aa) - 1; i >= 0; i-- {
		c, err = p.aa[i].decode(c, p.aaIn[i])
		if err != nil {
			return nil, &Error{Codec: p.aa[i].name(), Err: err}
		}
	}
	return c, nil
}

// maxExpand bounds an intermediate decoded size: the final size (else the
// chunk limit) plus the framing a checksum or compressor may add.
func maxExpand(in, final, limit int64) int64 {
	if final < 0 {
		final = limit
	}
	return final + 1<<20 + in
}

func (p *pipeline) encode(c *Chunk) ([]byte, error) {
	var err error
	for i, aa := range p.aa {
		if c, err = aa.encode(c); err != nil {
			return nil, &Error{Codec: p.aa[i].name(), Err: err}
		}
	}
	b, err := p.ab.encode(c, p.abIn)
	if err != nil {
		return nil, &Error{Codec: p.ab.name(), Err: err}
	}
	for _, bb := range p.bb {
		if b, err = bb.encode(b); err != nil {
			return nil, &Error{Codec: bb.name(), Err: err}
		}
	}
	return b, nil
}

// ---- bytes ----

type bytesCodec struct{ big bool }

func newBytesCodec(cfg json.RawMessage, in rep) (*bytesCodec, error) {
	var c struct {
		Endian *string `json:"endian"`
	}
	if len(cfg) > 0 {
		if err := json.Unmarshal(cfg, &c); err != nil {
			return nil, metaErr("bytes configuration: %v", err)
		}
	}
	if in.typ.Variable() {
		return nil, metaErr("codec bytes cannot encode variable-length %s", in.typ.Name)
	}
	bc := &bytesCodec{}
	if c.Endian != nil {
		switch *c.Endian {
		case "little":
		case "big":
			bc.big = true
		default:
			return nil, metaErr("bytes endian %q", *c.Endian)
		}
	} else if in.typ.Size > 1 {
		return nil, metaErr("bytes codec needs endian for %s", in.typ.Name)
	}
	return bc, nil
}

func (bytesCodec) name() string { return "bytes" }

func (bytesCodec) encodedSize(r rep) int64 { return prod(r.shape) * int64(r.typ.Size) }

func (c bytesCodec) decode(b []byte, r rep) (*Chunk, error) {
	want := prod(r.shape) * int64(r.typ.Size)
	if int64(len(b)) != want {
		return nil, corrupt("%d bytes, want %d (%d × %s)", len(b), want, prod(r.shape), r.typ.Name)
	}
	if c.big {
		swapInPlace(b, r.typ)
	}
	return &Chunk{Shape: r.shape, Type: r.typ, Data: b}, nil
}

func (c bytesCodec) encode(ch *Chunk, r rep) ([]byte, error) {
	if !c.big {
		return ch.Data, nil
	}
	out := bytes.Clone(ch.Data)
	swapInPlace(out, r.typ)
	return out, nil
}

// swapInPlace reverses the byte order of every element (complex: of each
// half).
func swapInPlace(b []byte, t DataType) {
	w := t.Size
	if t.Kind == KindComplex {
		w /= 2
	}
	switch w {
	case 2:
		for i := 0; i+2 <= len(b); i += 2 {
			binary.LittleEndian.PutUint16(b[i:], bits.ReverseBytes16(binary.LittleEndian.Uint16(b[i:])))
		}
	case 4:
		for i := 0; i+4 <= len(b); i += 4 {
			binary.LittleEndian.PutUint32(b[i:], bits.ReverseBytes32(binary.LittleEndian.Uint32(b[i:])))
		}
	case 8:
		for i := 0; i+8 <= len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], bits.ReverseBytes64(binary.LittleEndian.Uint64(b[i:])))
		}
	}
}

// ---- vlen ----

type vlenCodec struct {
	codecName string
	layout    vlen.Layout
}

func (c *vlenCodec) name() string          { return c.codecName }
func (c *vlenCodec) encodedSize(rep) int64 { return -1 }

func (c *vlenCodec) decode(b []byte, r rep) (*Chunk, error) {
	n := prod(r.shape)
	if n > int64(len(b)) {
		return nil, corrupt("%d elements cannot fit in %d bytes", n, len(b))
	}
	elems, err := corruptIf(c.layout.Decode(b, int(n)))
	if err != nil {
		return nil, err
	}
	return &Chunk{Shape: r.shape, Type: r.typ, Elems: elems}, nil
}

func (c *vlenCodec) encode(ch *Chunk, _ rep) ([]byte, error) { return c.layout.Encode(ch.Elems) }

func validUTF8(b []byte) bool { return utf8.Valid(b) }

// ---- zstd ----

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

// ---- gzip ----

type gzipCodec struct{ level int }

func (gzipCodec) name() string { return "gzip" }

func (gzipCodec) decode(b []byte, size outSize) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, corrupt("gzip: %v", err)
	}
	defer r.Close()
	if size.exact >= 0 {
		// Straight into the one buffer: a bytes.Buffer would double it
		// when the last read fills it.
		out := make([]byte, size.exact)
		if _, err := io.ReadFull(r, out); err != nil {
			return nil, corrupt("gzip: %v (want %d bytes)", err, size.exact)
		}
		// Reading on to the end checks the CRC and length trailer.
		var one [1]byte
		switch n, err := r.Read(one[:]); {
		case n > 0:
			return nil, corrupt("gzip output exceeds %d bytes", size.exact)
		case err != io.EOF:
			return nil, corrupt("gzip: %v", err)
		}
		return out, nil
	}
	// The buffer grows (doubling) with what is inflated.
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(r, size.max+1))
	if err != nil {
		return nil, corrupt("gzip: %v", err)
	}
	if n > size.max {
		return nil, corrupt("gzip output exceeds %d bytes", size.max)
	}
	return buf.Bytes(), nil
}

func (c gzipCodec) encode(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, c.level)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ---- blosc ----

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

// corruptIf marks a leaf decoder's error (blosc, vlen) as ErrCorrupt, so
// that callers classify it like every other bad chunk.
func corruptIf[T any](v T, err error) (T, error) {
	if err != nil {
		var zero T
		return zero, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return v, nil
}

func (c *bloscCodec) encode(b []byte) ([]byte, error) { return blosc.Encode(nil, b, c.opts) }

// ---- crc32c ----

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type crc32cCodec struct{}

func (crc32cCodec) name() string { return "crc32c" }

func (crc32cCodec) decode(b []byte, _ outSize) ([]byte, error) {
	if len(b) < 4 {
		return nil, corrupt("%d bytes cannot hold a crc32c", len(b))
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, ErrChecksum
	}
	return body, nil
}

func (crc32cCodec) encode(b []byte) ([]byte, error) {
	return binary.LittleEndian.AppendUint32(append(make([]byte, 0, len(b)+4), b...), crc32.Checksum(b, castagnoli)), nil
}
