package api

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/zvfserve/zvfserve/zvf"
)

// plyCodec writes points, meshes and lines as binary little-endian PLY:
// one vertex element in answer order whose properties are the axes (named
// as the store names them), object_id when the level has object ids, and
// the attributes (named as stored, a multi-channel one name_0, name_1, …;
// categorical as their integer codes with the labels in a comment), then
// for a mesh a face element holding the answer's faces, for lines
// (streamlines, skeletons, graphs) an edge element of vertex1 and vertex2
// (the answer's edges, in order and direction) followed by a property per
// channel of each link attribute edge_attributes= names. Types are kept
// where PLY has them; int64 and uint64 become double (exact below 2^53),
// float16 float, bool uchar. PLY has no null: an edge without a value is
// NaN, in a double property when the attribute is not a float one. The
// header counts the vertices, faces and edges, so the answer is held until
// its end (bounded by its limit).
//
// A point cloud's page is a file of its own; a mesh's faces and lines'
// edges would reach into other pages.
var plyCodec = exportCodec{name: "ply", mime: "application/octet-stream", geoms: plyGeometries, pageGeoms: []string{"point_cloud"},
	encoder: holding(writePLY)}

// plyGeometries are the geometries PLY holds: points, meshes (faces) and
// lines (edges).
var plyGeometries = append([]string{"point_cloud", "mesh", "skeleton", "graph"}, streamlineGeometries...)

// plyEdges reports whether a PLY of geometry geom has an edge element.
func plyEdges(geom string) bool { return geom != "point_cloud" && geom != "mesh" }

// plyType is how a stored type is written to PLY: its PLY name, and
// whether its bytes go as stored (else each value is converted to
// conv's type).
type plyType struct {
	name string
	raw  bool
}

func plyTypeOf(dtype string) plyType {
	switch dtype {
	case "int8":
		return plyType{"char", true}
	case "uint8", "bool":
		return plyType{"uchar", true}
	case "int16":
		return plyType{"short", true}
	case "uint16":
		return plyType{"ushort", true}
	case "int32":
		return plyType{"int", true}
	case "uint32":
		return plyType{"uint", true}
	case "float32":
		return plyType{"float", true}
	case "float64":
		return plyType{"double", true}
	case "float16":
		return plyType{"float", false}
	}
	return plyType{"double", false} // int64, uint64
}

// appendPLYValue appends element i of c converted to t.
func appendPLYValue(dst []byte, c *zvf.Column, i int, t plyType) []byte {
	if t.name == "float" {
		return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(float(c, i))))
	}
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(float(c, i)))
}

// uniqueNames refuses a file whose columns would repeat a name (an
// attribute named like a column the format writes itself, such as an axis
// or object_id, or like a channel of another attribute): readers take
// one of the two, or refuse the file.
func uniqueNames(format string, names []string) error {
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if seen[n] {
			return unrepresentable(fmt.Sprintf("f=%s would have two columns named %q (an attribute named like a column the format writes itself, or like another attribute's channel); ask for other attributes", format, n))
		}
		seen[n] = true
	}
	return nil
}

func writePLY(w *bufio.Writer, a *held) error {
	m := a.m
	if a.rows > math.MaxInt32 {
		return unrepresentable("PLY's face lists index vertices with 32-bit integers")
	}
	vt := plyTypeOf(a.verts.DType)
	if a.rows == 0 {
		vt = plyTypeOf(m.VertexDType)
	}
	var names []string
	hdr := []byte("ply\nformat binary_little_endian 1.0\ncomment zvfserve export: " + m.Export.source + "\n")
	for _, at := range m.Attributes {
		if len(at.Categories) > 0 {
			labels, err := json.Marshal(at.Categories)
			if err != nil {
				return err
			}
			hdr = fmt.Appendf(hdr, "comment categories %s %s\n", columnName(at.Name), labels)
		}
	}
	for _, at := range m.EdgeAttributes {
		if len(at.Categories) > 0 {
			labels, err := json.Marshal(at.Categories)
			if err != nil {
				return err
			}
			hdr = fmt.Appendf(hdr, "comment edge categories %s %s\n", columnName(at.Name), labels)
		}
	}
	hdr = fmt.Appendf(hdr, "element vertex %d\n", a.rows)
	for _, n := range axisNames(m.Export.axes, m.Dims) {
		n = columnName(n)
		names = append(names, n)
		hdr = fmt.Appendf(hdr, "property %s %s\n", vt.name, n)
	}
	idType := "int"
	for _, id := range a.ids {
		if id < math.MinInt32 || id > math.MaxInt32 {
			idType = "double"
			break
		}
	}
	if m.ObjectIDs {
		names = append(names, "object_id")
		hdr = fmt.Appendf(hdr, "property %s object_id\n", idType)
	}
	types := make([]plyType, len(m.Attributes))
	for k, at := range m.Attributes {
		types[k] = plyTypeOf(at.DType)
		for _, n := range channelNames(columnName(at.Name), at.Channels) {
			names = append(names, n)
			hdr = fmt.Appendf(hdr, "property %s %s\n", types[k].name, n)
		}
	}
	if err := uniqueNames("ply", names); err != nil {
		return err
	}
	edgeHdr, err := plyEdgeHeader(a)
	if err != nil {
		return err
	}
	faces := 0
	if m.Export.geom == "mesh" {
		if a.faceWidth > 255 {
			return unrepresentable(fmt.Sprintf("faces of %d corners: PLY's face lists here count corners in a byte", a.faceWidth))
		}
		if a.faceWidth > 0 {
			faces = len(a.faces) / a.faceWidth
		}
		hdr = fmt.Appendf(hdr, "element face %d\nproperty list uchar int vertex_indices\n", faces)
	}
	hdr = append(hdr, edgeHdr.header...)
	hdr = append(hdr, "end_header\n"...)
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	row := a.verts.RowBytes()
	var buf []byte
	for i := 0; i < a.rows; i++ {
		buf = buf[:0]
		if vt.raw {
			buf = append(buf, a.verts.Data[i*row:(i+1)*row]...)
		} else {
			for k := 0; k < a.verts.Channels; k++ {
				buf = appendPLYValue(buf, &a.verts, i*a.verts.Channels+k, vt)
			}
		}
		if m.ObjectIDs {
			var id int64 = -1
			if a.ids != nil {
				id = a.ids[i]
			}
			if idType == "int" {
				buf = binary.LittleEndian.AppendUint32(buf, uint32(int32(id)))
			} else {
				buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(float64(id)))
			}
		}
		for k := range a.attrs {
			c := &a.attrs[k]
			if types[k].raw {
				rb := c.RowBytes()
				buf = append(buf, c.Data[i*rb:(i+1)*rb]...)
				continue
			}
			for ch := 0; ch < c.Channels; ch++ {
				buf = appendPLYValue(buf, c, i*c.Channels+ch, types[k])
			}
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	for f := 0; f < faces; f++ {
		buf = append(buf[:0], byte(a.faceWidth))
		for _, v := range a.faces[f*a.faceWidth : (f+1)*a.faceWidth] {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(int32(v)))
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return writePLYEdges(w, a, edgeHdr.types, buf)
}

// plyEdgeElement is the edge element of a PLY of lines: its header lines,
// and the type each link attribute is written as.
type plyEdgeElement struct {
	header []byte
	types  []plyType
}

// plyEdgeHeader is the edge element's header: none for points and
// meshes, which answer no edges (edgeAttrsSetup refuses edge_attributes
// for them).
func plyEdgeHeader(a *held) (plyEdgeElement, error) {
	var e plyEdgeElement
	if !plyEdges(a.m.Export.geom) {
		return e, nil
	}
	n := len(a.edges) / 2
	e.header = fmt.Appendf(nil, "element edge %d\nproperty int vertex1\nproperty int vertex2\n", n)
	names := []string{"vertex1", "vertex2"}
	if len(a.edgeAttrs) != len(a.m.EdgeAttributes) {
		return e, fmt.Errorf("%d edge attribute columns, the header %d", len(a.edgeAttrs), len(a.m.EdgeAttributes))
	}
	e.types = make([]plyType, len(a.edgeAttrs))
	for k := range a.edgeAttrs {
		c := &a.edgeAttrs[k]
		if c.RowBytes() == 0 || c.Edges() != n {
			return e, fmt.Errorf("edge attribute %q: values for %d edges, not %d", c.Name, c.Edges(), n)
		}
		t := plyTypeOf(c.DType)
		if c.Valid != nil && slices.Contains(c.Valid, false) && t.name != "float" && t.name != "double" {
			t = plyType{"double", false} // NaN says "no value"
		}
		e.types[k] = t
		for _, name := range channelNames(columnName(c.Name), c.Channels) {
			names = append(names, name)
			e.header = fmt.Appendf(e.header, "property %s %s\n", t.name, name)
		}
	}
	if err := uniqueNames("ply", names); err != nil {
		return e, err
	}
	return e, nil
}

// writePLYEdges writes the edge element's rows: the two vertex indices,
// then each attribute's values (NaN for an edge without one).
func writePLYEdges(w *bufio.Writer, a *held, types []plyType, buf []byte) error {
	if !plyEdges(a.m.Export.geom) {
		return nil
	}
	stored := make([]int, len(a.edgeAttrs)) // each column's stored row of the next edge with a value
	for i := 0; i < len(a.edges)/2; i++ {
		buf = binary.LittleEndian.AppendUint32(buf[:0], uint32(int32(a.edges[2*i])))
		buf = binary.LittleEndian.AppendUint32(buf, uint32(int32(a.edges[2*i+1])))
		for k := range a.edgeAttrs {
			c, t := &a.edgeAttrs[k], types[k]
			r := stored[k]
			if c.Has(i) {
				stored[k]++
			}
			switch {
			case !c.Has(i):
				for range c.Channels {
					if t.name == "float" {
						buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(float32(math.NaN())))
					} else {
						buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(math.NaN()))
					}
				}
			case t.raw:
				rb := c.RowBytes()
				buf = append(buf, c.Data[r*rb:(r+1)*rb]...)
			default:
				for ch := 0; ch < c.Channels; ch++ {
					buf = appendPLYValue(buf, &c.Column, r*c.Channels+ch, t)
				}
			}
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}
