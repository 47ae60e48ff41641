package api

import (
	"encoding/json"
	"strconv"
)

// appendMeta appends m as encoding/json writes it (the binary answer's
// header, on every request). Field by field when every string is plain
// (plainString: nothing encoding/json escapes), which store names, dtypes
// and the usual attribute names are; through encoding/json otherwise.
func appendMeta(dst []byte, m *payloadMeta) ([]byte, error) {
	if !metaPlain(m) {
		b, err := json.Marshal(m)
		return append(dst, b...), err
	}
	dst = append(append(dst, `{"kind":"`...), m.Kind...)
	dst = append(append(dst, `","store":"`...), m.Store...)
	dst = strconv.AppendInt(append(dst, `","level":`...), int64(m.Level), 10)
	dst = strconv.AppendInt(append(dst, `,"dims":`...), int64(m.Dims), 10)
	dst = append(append(dst, `,"vertex_dtype":"`...), m.VertexDType...)
	dst = append(dst, `","attribute_info":`...)
	if m.Attributes == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i, a := range m.Attributes {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(append(dst, `{"name":"`...), a.Name...)
			dst = append(append(dst, `","dtype":"`...), a.DType...)
			dst = strconv.AppendInt(append(dst, `","channels":`...), int64(a.Channels), 10)
			if a.Categories != nil { // omitzero
				dst = append(dst, `,"categories":[`...)
				for j, c := range a.Categories {
					if j > 0 {
						dst = append(dst, ',')
					}
					dst = append(append(append(dst, '"'), c...), '"')
				}
				dst = append(dst, ']')
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	dst = strconv.AppendBool(append(dst, `,"has_object_ids":`...), m.ObjectIDs)
	return append(dst, '}'), nil
}

// metaPlain reports whether every string of m is plain.
func metaPlain(m *payloadMeta) bool {
	if len(m.EdgeAttributes) > 0 {
		return false // rare: encoding/json writes them
	}
	if !plainString(m.Kind) || !plainString(m.Store) || !plainString(m.VertexDType) {
		return false
	}
	for _, a := range m.Attributes {
		if !plainString(a.Name) || !plainString(a.DType) {
			return false
		}
		for _, c := range a.Categories {
			if !plainString(c) {
				return false
			}
		}
	}
	return true
}
