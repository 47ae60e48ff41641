package zarr

import (
	"fmt"
	"math"
	"math/bits"
	"sync"
	"unsafe"

	"github.com/klauspost/compress/zstd"

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
	makers   map[string]codecMaker // codecTable, read-only
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
	cs := &Codecs{lim: Limits{MaxChunkBytes: DefaultMaxChunkBytes, MaxReadBytes: DefaultMaxReadBytes}, makers: codecTable()}
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
// Limits are the allocation limits every array opened with cs is held
// to (the defaults filled in).
func (cs *Codecs) Limits() Limits { return cs.lim }

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

// codecMaker makes one codec of a chain from its spec, for chunks of
// representation in (what the codec decodes to).
type codecMaker func(cs *Codecs, s CodecSpec, in rep) (resolved, error)

// codecTable names every codec the package reads and writes, with its
// constructor; each codec is in a file of its own, codec_NAME.go. A
// *Codecs keeps the table (NewCodecs) and never changes it. It is not a
// package variable: sharding builds its inner chain through the table, so
// a variable's initializer would refer to itself.
func codecTable() map[string]codecMaker {
	return map[string]codecMaker{
		"bytes":            makeBytes,
		"vlen-bytes":       makeVlen,
		"vlen-utf8":        makeVlen,
		"zarrs.vlen":       makeZarrsVlen,
		"sharding_indexed": makeSharding,
		"transpose":        makeTranspose,
		"scale_offset":     makeScaleOffset,
		"cast_value":       makeCastValue,
		"zstd":             makeZstd,
		"gzip":             makeGzip,
		"blosc":            makeBlosc,
		"crc32c":           makeCRC32C,
		// zarrs.vlen under the name zarrs writes too
		"https://codec.zarrs.dev/array_to_bytes/vlen": makeZarrsVlen,
	}
}

// resolved is one codec of a chain: exactly one field is set, by the
// codec's kind.
type resolved struct {
	aa arrayToArray
	ab arrayToBytes
	bb bytesToBytes
}

// arrayToArrayCodec and arrayToBytesCodec are a constructor's result as
// a resolved codec of their kind.
func arrayToArrayCodec[C arrayToArray](c C, err error) (resolved, error) {
	if err != nil {
		return resolved{}, err
	}
	return resolved{aa: c}, nil
}

func arrayToBytesCodec[C arrayToBytes](c C, err error) (resolved, error) {
	if err != nil {
		return resolved{}, err
	}
	return resolved{ab: c}, nil
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
