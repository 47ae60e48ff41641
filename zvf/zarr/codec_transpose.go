package zarr

import (
	"encoding/json"
)

// transpose permutes axes: encoded axis i is decoded axis order[i].
func makeTranspose(_ *Codecs, s CodecSpec, in rep) (resolved, error) {
	return arrayToArrayCodec(newTranspose(s.Configuration, in))
}

type transpose struct {
	order []int
}

func newTranspose(cfg json.RawMessage, in rep) (*transpose, error) {
	var c struct {
		Order json.RawMessage `json:"order"`
	}
	if err := json.Unmarshal(cfg, &c); err != nil {
		return nil, metaErr("transpose configuration: %v", err)
	}
	var order []int
	var s string
	if json.Unmarshal(c.Order, &s) == nil {
		// Legacy "C" / "F" forms.
		order = make([]int, len(in.shape))
		for i := range order {
			if s == "F" {
				order[i] = len(order) - 1 - i
			} else {
				order[i] = i
			}
		}
	} else if err := json.Unmarshal(c.Order, &order); err != nil {
		return nil, metaErr("transpose order: %v", err)
	}
	if len(order) != len(in.shape) {
		return nil, metaErr("transpose order %v does not match rank %d", order, len(in.shape))
	}
	seen := make([]bool, len(order))
	for _, o := range order {
		if o < 0 || o >= len(order) || seen[o] {
			return nil, metaErr("transpose order %v is not a permutation", order)
		}
		seen[o] = true
	}
	if in.typ.Variable() {
		return nil, unsupported("transpose of variable-length %s", in.typ.Name)
	}
	return &transpose{order: order}, nil
}

func (*transpose) name() string { return "transpose" }

func (t *transpose) out(in rep) (rep, error) {
	shape := make([]int64, len(in.shape))
	for i, o := range t.order {
		shape[i] = in.shape[o]
	}
	return rep{shape: shape, typ: in.typ, fill: in.fill}, nil
}

// decode turns a chunk in encoded (permuted) order back into in's order.
func (t *transpose) decode(c *Chunk, in rep) (*Chunk, error) {
	if int64(len(c.Data)) != prod(in.shape)*int64(in.typ.Size) {
		return nil, corrupt("transpose input has %d bytes", len(c.Data))
	}
	out := make([]byte, len(c.Data))
	permute(out, c.Data, c.Shape, t.order, in.typ.Size, false)
	return &Chunk{Shape: in.shape, Type: in.typ, Data: out}, nil
}

func (t *transpose) encode(c *Chunk) (*Chunk, error) {
	r, _ := t.out(rep{shape: c.Shape, typ: c.Type})
	out := make([]byte, len(c.Data))
	permute(out, c.Data, c.Shape, t.order, c.Type.Size, true)
	return &Chunk{Shape: r.shape, Type: c.Type, Data: out}, nil
}

// permute copies elements between the decoded layout (shape dec) and the
// encoded layout (axis i of enc = axis order[i] of dec). With toEnc the
// source is decoded-order data of shape decShape; otherwise the source is
// encoded-order data whose shape is encShape.
func permute(dst, src []byte, srcShape []int64, order []int, size int, toEnc bool) {
	n := len(order)
	var decShape []int64
	if toEnc {
		decShape = srcShape
	} else {
		decShape = make([]int64, n)
		for i, o := range order {
			decShape[o] = srcShape[i]
		}
	}
	encShape := make([]int64, n)
	for i, o := range order {
		encShape[i] = decShape[o]
	}
	// strides of each layout in elements
	decStride := make([]int64, n)
	encStride := make([]int64, n)
	s := int64(1)
	for i := n - 1; i >= 0; i-- {
		decStride[i] = s
		s *= decShape[i]
	}
	s = 1
	for i := n - 1; i >= 0; i-- {
		encStride[i] = s
		s *= encShape[i]
	}
	total := prod(decShape)
	idx := make([]int64, n) // decoded-order index
	for k := int64(0); k < total; k++ {
		var d, e int64
		for a := 0; a < n; a++ {
			d += idx[a] * decStride[a]
		}
		for i, o := range order {
			e += idx[o] * encStride[i]
		}
		if toEnc {
			copy(dst[e*int64(size):(e+1)*int64(size)], src[d*int64(size):(d+1)*int64(size)])
		} else {
			copy(dst[d*int64(size):(d+1)*int64(size)], src[e*int64(size):(e+1)*int64(size)])
		}
		Advance(idx, decShape)
	}
}
