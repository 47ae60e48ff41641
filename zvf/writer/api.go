package writer

import (
	"encoding/binary"
	"math"
	"runtime"
	"slices"
)

// Codec selects the codec chain of the per-chunk blob arrays written by the
// geometry writers (the reference's compressor= argument).
type Codec int

const (
	// CodecNone writes raw bytes ([{"name":"bytes"}]), the reference default.
	CodecNone Codec = iota
	// CodecZstd adds zstd (level 0 = library default, no checksum).
	CodecZstd
	// CodecBlosc adds blosc (zstd, clevel 5, bitshuffle, typesize 4).
	CodecBlosc
)

// String names the codec as the command line spells it.
func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecZstd:
		return "zstd"
	case CodecBlosc:
		return "blosc"
	}
	return "unknown"
}

// ParseCodec maps "none", "zstd" or "blosc" to a Codec.
func ParseCodec(s string) (Codec, error) {
	switch s {
	case "none", "":
		return CodecNone, nil
	case "zstd":
		return CodecZstd, nil
	case "blosc":
		return CodecBlosc, nil
	}
	return 0, inputErr("codec", -1, "%q is not one of none, zstd, blosc", s)
}

// Options are the store-wide settings shared by every geometry writer.
type Options struct {
	// ChunkShape is the level-0 chunk edge per axis (required, > 0).
	ChunkShape []float64
	// BinShape is the level-0 bin edge; it must divide ChunkShape. Nil
	// means one bin per chunk.
	BinShape []float64
	// Bounds is the inclusive data box [min, max] (finite, min at most max
	// on each axis, holding every position); nil computes it from the
	// positions.
	Bounds *[2][]float64
	// Axes names the spatial axes; nil means x, y, z (and w for 4-D).
	Axes []string
	// Unit is the axes' unit (an OME-NGFF / UDUNITS name such as
	// "micrometer"); "" writes none.
	Unit string
	// Codec is the blob codec for level-0 arrays. Pyramid levels and
	// cross-level links always use zstd, as in the reference.
	Codec Codec
	// Concurrency bounds how many chunks are encoded and written at once
	// (default GOMAXPROCS). Memory held for blobs is about Concurrency
	// chunks.
	Concurrency int
	// Pyramid lists coarser levels 1..n built by per-object metavertex
	// coarsening, with cross-level links ±1.
	Pyramid []PyramidLevel
	// SparsitySeed seeds object dropping for levels with Sparsity > 1.
	SparsitySeed uint64
}

// PyramidLevel describes how level i+1 is derived from level i.
type PyramidLevel struct {
	// Coarsen multiplies the root base bin shape (not cumulative, as in
	// the reference): each occupied bin of that size becomes one
	// metavertex at the mean of the vertices in it. Must be >= 1.
	Coarsen float64
	// Sparsity >= 1 keeps about 1/Sparsity of the objects (0 means 1).
	Sparsity float64
	// ChunkScale >= 1 multiplies the source level's chunk shape (0 means 1).
	ChunkScale int
}

func (o *Options) concurrency() int {
	if o.Concurrency > 0 {
		return o.Concurrency
	}
	return runtime.GOMAXPROCS(0)
}

// Attribute is a per-row attribute column (vertex, link, object or group
// rows): Channels values of DType per row, little-endian, row-major.
// Build one with Float32Attribute, Int32Attribute, Uint8Attribute or
// CategoricalAttribute.
type Attribute struct {
	Name     string
	DType    string // numpy dtype name: float32, float64, int8..int64, uint8..uint64
	Channels int    // values per row, >= 1
	Data     []byte
	// Categories, when set, marks a dictionary-encoded string attribute:
	// Data holds integer codes into Categories.
	Categories []string
}

// Float32Attribute builds a float32 attribute with channels values per row.
func Float32Attribute(name string, channels int, v []float32) Attribute {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return Attribute{Name: name, DType: "float32", Channels: max(channels, 1), Data: b}
}

// Int32Attribute builds an int32 attribute with channels values per row.
func Int32Attribute(name string, channels int, v []int32) Attribute {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return Attribute{Name: name, DType: "int32", Channels: max(channels, 1), Data: b}
}

// Int64Attribute builds an int64 attribute with channels values per row.
func Int64Attribute(name string, channels int, v []int64) Attribute {
	return Attribute{Name: name, DType: "int64", Channels: max(channels, 1), Data: appendInt64s(make([]byte, 0, 8*len(v)), v)}
}

// Uint8Attribute builds a uint8 attribute with channels values per row.
func Uint8Attribute(name string, channels int, v []uint8) Attribute {
	return Attribute{Name: name, DType: "uint8", Channels: max(channels, 1), Data: slices.Clone(v)}
}

// CategoricalAttribute dictionary-encodes strings the way the reference
// does for point clouds: categories are the sorted unique values, codes use
// the smallest unsigned type that fits.
func CategoricalAttribute(name string, values []string) Attribute {
	cats := slices.Clone(values)
	slices.Sort(cats)
	cats = slices.Compact(cats)
	code := make(map[string]int, len(cats))
	for i, c := range cats {
		code[c] = i
	}
	a := Attribute{Name: name, Channels: 1, Categories: cats}
	switch {
	case len(cats) <= 1<<8:
		a.DType = "uint8"
		a.Data = make([]byte, len(values))
		for i, v := range values {
			a.Data[i] = byte(code[v])
		}
	case len(cats) <= 1<<16:
		a.DType = "uint16"
		a.Data = make([]byte, 0, 2*len(values))
		for _, v := range values {
			a.Data = binary.LittleEndian.AppendUint16(a.Data, uint16(code[v]))
		}
	default:
		a.DType = "uint32"
		a.Data = make([]byte, 0, 4*len(values))
		for _, v := range values {
			a.Data = binary.LittleEndian.AppendUint32(a.Data, uint32(code[v]))
		}
	}
	return a
}

// maxChannels bounds values per attribute row (keeps row sizes far from
// integer overflow).
const maxChannels = 1 << 16

// itemSize returns the byte size of a numpy dtype name, or 0 if unknown.
func itemSize(dtype string) int {
	switch dtype {
	case "int8", "uint8", "bool":
		return 1
	case "int16", "uint16", "float16":
		return 2
	case "int32", "uint32", "float32":
		return 4
	case "int64", "uint64", "float64":
		return 8
	}
	return 0
}

// rowSize is the byte size of one attribute row.
func (a *Attribute) rowSize() int { return itemSize(a.DType) * a.Channels }

// check validates the attribute against the expected row count.
func (a *Attribute) check(field string, rows int) error {
	if a.Name == "" || a.Name == "." || a.Name == ".." || slices.Contains([]byte(a.Name), '/') {
		return inputErr(field, -1, "attribute name %q is not a valid path segment", a.Name)
	}
	if itemSize(a.DType) == 0 {
		return inputErr(field, -1, "attribute %q: unsupported dtype %q", a.Name, a.DType)
	}
	if a.Channels < 1 || a.Channels > maxChannels {
		return inputErr(field, -1, "attribute %q: channels %d outside [1, %d]", a.Name, a.Channels, maxChannels)
	}
	if len(a.Data) != rows*a.rowSize() {
		return inputErr(field, -1, "attribute %q: %d bytes, want %d rows x %d bytes", a.Name, len(a.Data), rows, a.rowSize())
	}
	return nil
}

// checkAttrs validates a list of attributes and rejects duplicate names.
func checkAttrs(field string, attrs []Attribute, rows int) error {
	seen := map[string]bool{}
	for i := range attrs {
		if err := attrs[i].check(field, rows); err != nil {
			return err
		}
		if seen[attrs[i].Name] {
			return inputErr(field, i, "duplicate attribute name %q", attrs[i].Name)
		}
		seen[attrs[i].Name] = true
	}
	return nil
}

// LevelSummary describes one written level.
type LevelSummary struct {
	Level       int
	VertexCount int
	ChunkCount  int
	ObjectCount int // OID space size; 0 when the level has no object index
}

// Summary describes a written store.
type Summary struct {
	Levels []LevelSummary
}
