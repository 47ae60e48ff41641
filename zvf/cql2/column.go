package cql2

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Column is one attribute's values for the rows of a chunk, as the reader
// holds them: packed little-endian values of a zarr data type, or strings.
type Column struct {
	// DType is the zarr data type of Data: float16, float32, float64,
	// int8 … int64, uint8 … uint64 or bool. It must fit the queryable's
	// kind and width: a float type for Float, a signed type for Int, an
	// unsigned type or bool for Uint, any integer type (the codes) for
	// Categorical.
	DType string
	// Data holds rows × Channels values, row after row.
	Data []byte
	// Channels is the number of values in a row (0 means 1); it must be
	// the queryable's.
	Channels int
	// Constant: Data (or Strings) holds one row that stands for every row,
	// e.g. the bin value of an attribute-chunked level's chunk.
	Constant bool
	// Labels is a categorical attribute's dictionary (code i is
	// Labels[i]); nil keeps the one bound before (initially the
	// queryable's). Each label predicate is worked out once per dictionary,
	// not per row.
	Labels []string
	// NullCode, when set, is the categorical code that means null.
	NullCode *int64
	// Strings holds a String attribute's values, one per row (DType and
	// Data are not used then).
	Strings []string
}

type dtype uint8

const (
	dtBool dtype = iota + 1
	dtI8
	dtI16
	dtI32
	dtI64
	dtU8
	dtU16
	dtU32
	dtU64
	dtF16
	dtF32
	dtF64
)

// parseDType returns the type, its size in bytes and its kind (Float, Int
// or Uint).
func parseDType(s string) (dtype, int, Kind, bool) {
	switch s {
	case "bool":
		return dtBool, 1, Uint, true
	case "int8":
		return dtI8, 1, Int, true
	case "int16":
		return dtI16, 2, Int, true
	case "int32":
		return dtI32, 4, Int, true
	case "int64":
		return dtI64, 8, Int, true
	case "uint8":
		return dtU8, 1, Uint, true
	case "uint16":
		return dtU16, 2, Uint, true
	case "uint32":
		return dtU32, 4, Uint, true
	case "uint64":
		return dtU64, 8, Uint, true
	case "float16":
		return dtF16, 2, Float, true
	case "float32":
		return dtF32, 4, Float, true
	case "float64":
		return dtF64, 8, Float, true
	}
	return 0, 0, 0, false
}

// binding is a bound Column, checked.
type binding struct {
	set      bool
	dt       dtype
	size     int
	data     []byte
	stride   int // bytes from one row to the next; 0 when constant
	rows     int // rows held; math.MaxInt when constant
	strs     []string
	labels   []string
	null     int64
	hasNull  bool
	constant bool
}

// bind checks c against the queryable q.
func bind(q *Queryable, c Column, prev *binding) (binding, error) {
	ch := max(c.Channels, 1)
	if want := max(q.Channels, 1); ch != want {
		return binding{}, fmt.Errorf("cql2: attribute %q bound with %d channels, its queryable has %d", q.Name, ch, want)
	}
	b := binding{set: true, constant: c.Constant, labels: prev.labels, null: prev.null, hasNull: prev.hasNull}
	if q.Kind == String {
		b.strs, b.rows = c.Strings, len(c.Strings)
		if c.Constant {
			if len(c.Strings) != 1 {
				return binding{}, fmt.Errorf("cql2: constant attribute %q bound with %d strings, not 1", q.Name, len(c.Strings))
			}
			b.rows = math.MaxInt
		}
		return b, nil
	}
	dt, size, kind, ok := parseDType(c.DType)
	switch {
	case !ok:
		return binding{}, fmt.Errorf("cql2: attribute %q bound with data type %q", q.Name, c.DType)
	case q.Kind == Categorical && kind == Float:
		return binding{}, fmt.Errorf("cql2: categorical attribute %q bound with %s codes", q.Name, c.DType)
	case q.Kind != Categorical && kind != q.Kind:
		return binding{}, fmt.Errorf("cql2: %v attribute %q bound with %s data", q.Kind, q.Name, c.DType)
	case q.Kind != Categorical && q.Bits != 0 && dt != dtBool && q.Bits != 8*size:
		return binding{}, fmt.Errorf("cql2: %v%d attribute %q bound with %s data", q.Kind, q.Bits, q.Name, c.DType)
	}
	if q.Kind == Categorical && dt == dtBool {
		dt = dtU8 // a code: its byte as it is, as the answers label it
	}
	rowBytes := ch * size
	if len(c.Data)%rowBytes != 0 {
		return binding{}, fmt.Errorf("cql2: attribute %q bound with %d bytes, not a whole number of %d-byte rows", q.Name, len(c.Data), rowBytes)
	}
	b.dt, b.size, b.data, b.stride, b.rows = dt, size, c.Data, rowBytes, len(c.Data)/rowBytes
	if c.Constant {
		if b.rows != 1 {
			return binding{}, fmt.Errorf("cql2: constant attribute %q bound with %d rows, not 1", q.Name, b.rows)
		}
		b.stride, b.rows = 0, math.MaxInt
	}
	if q.Kind == Categorical {
		if c.Labels != nil {
			b.labels = c.Labels
		}
		b.hasNull = c.NullCode != nil
		if b.hasNull {
			b.null = *c.NullCode
		}
	}
	return b, nil
}

// The gathers read the value at byte off of each row into dst, widened
// exactly (float16 and float32 to float64, integers to 64 bits, a bool
// to 0 or 1, any byte but 0 being 1); a
// categorical code of a signed type goes through int64, so that a negative
// code reads as a huge one (no label).

func gatherFloat(dst []float64, b *binding, off int, rows []int32) {
	data, stride := b.data, b.stride
	switch b.dt {
	case dtF32:
		for i, r := range rows {
			o := int(r)*stride + off
			dst[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(data[o : o+4])))
		}
	case dtF64:
		for i, r := range rows {
			o := int(r)*stride + off
			dst[i] = math.Float64frombits(binary.LittleEndian.Uint64(data[o : o+8]))
		}
	case dtF16:
		for i, r := range rows {
			o := int(r)*stride + off
			dst[i] = halfToFloat64(binary.LittleEndian.Uint16(data[o : o+2]))
		}
	}
}

func gatherInt(dst []int64, b *binding, off int, rows []int32) {
	data, stride := b.data, b.stride
	switch b.dt {
	case dtI8:
		for i, r := range rows {
			dst[i] = int64(int8(data[int(r)*stride+off]))
		}
	case dtI16:
		for i, r := range rows {
			o := int(r)*stride + off
			dst[i] = int64(int16(binary.LittleEndian.Uint16(data[o : o+2])))
		}
	case dtI32:
		for i, r := range rows {
			o := int(r)*stride + off
			dst[i] = int64(int32(binary.LittleEndian.Uint32(data[o : o+4])))
		}
	case dtI64:
		for i, r := range rows {
			o := int(r)*stride + off
			dst[i] = int64(binary.LittleEndian.Uint64(data[o : o+8]))
		}
	}
}

func gatherUint(dst []uint64, b *binding, off int, rows []int32) {
	data, stride := b.data, b.stride
	switch b.dt {
	case dtU8:
		for i, r := range rows {
			dst[i] = uint64(data[int(r)*stride+off])
		}
	case dtBool: // any byte but 0 is true, as the answers print it
		for i, r := range rows {
			dst[i] = uint64(b2u(data[int(r)*stride+off] != 0))
		}
	case dtU16:
		for i, r := range rows {
			o := int(r)*stride + off
			dst[i] = uint64(binary.LittleEndian.Uint16(data[o : o+2]))
		}
	case dtU32:
		for i, r := range rows {
			o := int(r)*stride + off
			dst[i] = uint64(binary.LittleEndian.Uint32(data[o : o+4]))
		}
	case dtU64:
		for i, r := range rows {
			o := int(r)*stride + off
			dst[i] = binary.LittleEndian.Uint64(data[o : o+8])
		}
	case dtI8, dtI16, dtI32, dtI64: // categorical codes
		var tmp [blockSize]int64
		gatherInt(tmp[:len(rows)], b, off, rows)
		for i, v := range tmp[:len(rows)] {
			dst[i] = uint64(v)
		}
	}
}

// halfToFloat64 widens an IEEE 754 binary16 value exactly.
func halfToFloat64(h uint16) float64 {
	exp, frac := int(h>>10)&0x1f, float64(h&0x3ff)
	var f float64
	switch exp {
	case 0: // zero and subnormals: frac × 2⁻²⁴
		f = math.Ldexp(frac, -24)
	case 0x1f:
		f = math.Inf(1)
		if frac != 0 {
			f = math.NaN()
		}
	default: // (1024 + frac) × 2^(exp-25)
		f = math.Ldexp(1024+frac, exp-25)
	}
	if h&0x8000 != 0 {
		f = -f
	}
	return f
}
