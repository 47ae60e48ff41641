package neuroglancer_test

// An independent decoder of the Neuroglancer precomputed formats, written
// from the format description (Neuroglancer's annotations.md,
// skeletons.md and meshes.md as digested for this project), not from the
// encoder: the tests read every answer through it.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
)

// ngInfo is an annotation info document as Neuroglancer parses it.
type ngInfo struct {
	Type           string               `json:"@type"`
	Dimensions     map[string][2]any    `json:"dimensions"`
	LowerBound     []float64            `json:"lower_bound"`
	UpperBound     []float64            `json:"upper_bound"`
	AnnotationType string               `json:"annotation_type"`
	Properties     []ngProperty         `json:"properties"`
	Relationships  []map[string]any     `json:"relationships"`
	ByID           struct{ Key string } `json:"by_id"`
	Spatial        []ngSpatial          `json:"spatial"`
	Extra          map[string]any       `json:"-"`
	raw            map[string]json.RawMessage
}

type ngProperty struct {
	ID          string    `json:"id"`
	Type        string    `json:"type"`
	Description string    `json:"description"`
	EnumValues  []float64 `json:"enum_values"`
	EnumLabels  []string  `json:"enum_labels"`
}

type ngSpatial struct {
	Key       string    `json:"key"`
	GridShape []int     `json:"grid_shape"`
	ChunkSize []float64 `json:"chunk_size"`
	Limit     int       `json:"limit"`
}

// parseInfo checks what Neuroglancer requires of an info and decodes it.
func parseInfo(b []byte) (*ngInfo, error) {
	var inf ngInfo
	if err := json.Unmarshal(b, &inf.raw); err != nil {
		return nil, err
	}
	for _, k := range []string{"@type", "dimensions", "lower_bound", "upper_bound", "annotation_type", "relationships", "by_id", "spatial"} {
		if _, ok := inf.raw[k]; !ok {
			return nil, fmt.Errorf("info lacks %q", k)
		}
	}
	if err := json.Unmarshal(b, &inf); err != nil {
		return nil, err
	}
	if inf.Type != "neuroglancer_annotations_v1" || inf.Relationships == nil {
		return nil, fmt.Errorf("@type %q, relationships %v", inf.Type, inf.Relationships)
	}
	rank := len(inf.Dimensions)
	if len(inf.LowerBound) != rank || len(inf.UpperBound) != rank {
		return nil, fmt.Errorf("bounds of %d and %d for rank %d", len(inf.LowerBound), len(inf.UpperBound), rank)
	}
	for _, p := range inf.Properties {
		if !validID(p.ID) {
			return nil, fmt.Errorf("property id %q", p.ID)
		}
		if size(p.Type) == 0 {
			return nil, fmt.Errorf("property type %q", p.Type)
		}
		if len(p.EnumValues) != len(p.EnumLabels) {
			return nil, fmt.Errorf("property %s: %d enum values, %d labels", p.ID, len(p.EnumValues), len(p.EnumLabels))
		}
	}
	for _, s := range inf.Spatial {
		if len(s.GridShape) != rank || len(s.ChunkSize) != rank || s.Limit < 1 {
			return nil, fmt.Errorf("spatial level %+v", s)
		}
		if _, ok := inf.raw["chunk_shape"]; ok {
			return nil, fmt.Errorf("chunk_shape instead of chunk_size")
		}
	}
	return &inf, nil
}

func validID(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func size(typ string) int {
	switch typ {
	case "uint8", "int8":
		return 1
	case "uint16", "int16":
		return 2
	case "uint32", "int32", "float32", "rgba":
		return 4
	case "rgb":
		return 3
	}
	return 0
}

// alignment: 4-byte types first, then 2-byte, then 1-byte (rgb and rgba
// among them).
func alignment(typ string) int {
	switch typ {
	case "uint32", "int32", "float32":
		return 4
	case "uint16", "int16":
		return 2
	}
	return 1
}

// recordLayout is the property order within a record.
func (inf *ngInfo) recordLayout() []ngProperty {
	out := slices.Clone(inf.Properties)
	slices.SortStableFunc(out, func(a, b ngProperty) int { return alignment(b.Type) - alignment(a.Type) })
	return out
}

func (inf *ngInfo) rank() int { return len(inf.Dimensions) }

// ngAnnotation is one decoded annotation.
type ngAnnotation struct {
	ID      uint64
	Points  [][]float32 // a point: 1; a line: 2; a polyline: n
	Props   map[string]float64
	Raw     []byte     // the record, as sent
	Related [][]uint64 // by_id: the segment ids of each relationship
}

// readRecord decodes one record at b[off:]: geometry, properties in
// alignment order, zero padding to 4 bytes. It returns the next offset.
func (inf *ngInfo) readRecord(b []byte, off int) (ngAnnotation, int, error) {
	le := binary.LittleEndian
	start := off
	rank := inf.rank()
	var a ngAnnotation
	n := 0
	switch inf.AnnotationType {
	case "point":
		n = 1
	case "line", "axis_aligned_bounding_box", "ellipsoid":
		n = 2
	case "polyline":
		if off+4 > len(b) {
			return a, 0, fmt.Errorf("polyline count past the end")
		}
		n = int(le.Uint32(b[off:]))
		off += 4
		if n > len(b)/(4*rank) {
			return a, 0, fmt.Errorf("polyline of %d points in %d bytes", n, len(b))
		}
	default:
		return a, 0, fmt.Errorf("annotation type %q", inf.AnnotationType)
	}
	for range n {
		if off+4*rank > len(b) {
			return a, 0, fmt.Errorf("geometry past the end")
		}
		p := make([]float32, rank)
		for i := range p {
			p[i] = math.Float32frombits(le.Uint32(b[off+4*i:]))
		}
		a.Points = append(a.Points, p)
		off += 4 * rank
	}
	a.Props = map[string]float64{}
	for _, p := range inf.recordLayout() {
		sz := size(p.Type)
		if off+sz > len(b) {
			return a, 0, fmt.Errorf("property %s past the end", p.ID)
		}
		v := b[off : off+sz]
		switch p.Type {
		case "uint8":
			a.Props[p.ID] = float64(v[0])
		case "int8":
			a.Props[p.ID] = float64(int8(v[0]))
		case "uint16":
			a.Props[p.ID] = float64(le.Uint16(v))
		case "int16":
			a.Props[p.ID] = float64(int16(le.Uint16(v)))
		case "uint32":
			a.Props[p.ID] = float64(le.Uint32(v))
		case "int32":
			a.Props[p.ID] = float64(int32(le.Uint32(v)))
		case "float32":
			a.Props[p.ID] = float64(math.Float32frombits(le.Uint32(v)))
		case "rgb", "rgba":
			x := 0.0
			for _, c := range v {
				x = x*256 + float64(c)
			}
			a.Props[p.ID] = x
		}
		off += sz
	}
	for (off-start)%4 != 0 {
		if off >= len(b) || b[off] != 0 {
			return a, 0, fmt.Errorf("padding past the end or not zero")
		}
		off++
	}
	a.Raw = b[start:off]
	return a, off, nil
}

// decodeList decodes a multiple-annotation list (a spatial cell): a uint64
// count, the records, then the ids; the length must be exact.
func (inf *ngInfo) decodeList(b []byte) ([]ngAnnotation, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("%d bytes: no count", len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n>>32 != 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("count %d", n)
	}
	out := make([]ngAnnotation, n)
	off := 8
	for i := range out {
		var err error
		if out[i], off, err = inf.readRecord(b, off); err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
	}
	if len(b) != off+8*int(n) {
		return nil, fmt.Errorf("%d bytes, records end at %d and %d ids need %d more", len(b), off, n, 8*n)
	}
	for i := range out {
		out[i].ID = binary.LittleEndian.Uint64(b[off+8*i:])
	}
	return out, nil
}

// decodeByID decodes a single annotation: its record, then one id list per
// relationship.
func (inf *ngInfo) decodeByID(b []byte, id uint64) (ngAnnotation, error) {
	a, off, err := inf.readRecord(b, 0)
	if err != nil {
		return a, err
	}
	for range inf.Relationships {
		if off+4 > len(b) {
			return a, fmt.Errorf("relationship count past the end")
		}
		n := int(binary.LittleEndian.Uint32(b[off:]))
		off += 4
		if n > (len(b)-off)/8 {
			return a, fmt.Errorf("%d related ids past the end", n)
		}
		ids := make([]uint64, n)
		for i := range ids {
			ids[i] = binary.LittleEndian.Uint64(b[off+8*i:])
		}
		a.Related = append(a.Related, ids)
		off += 8 * n
	}
	if off != len(b) {
		return a, fmt.Errorf("%d bytes, the annotation takes %d", len(b), off)
	}
	a.ID = id
	return a, nil
}

// ngSkeletonInfo is a skeleton info document.
type ngSkeletonInfo struct {
	Type             string    `json:"@type"`
	Transform        []float64 `json:"transform"`
	VertexAttributes []struct {
		ID            string `json:"id"`
		DataType      string `json:"data_type"`
		NumComponents int    `json:"num_components"`
	} `json:"vertex_attributes"`
	SegmentProperties string `json:"segment_properties"`
}

type ngSkeleton struct {
	Vertices [][3]float32
	Edges    [][2]uint32
	Attrs    map[string][]float64
}

// decodeSkeleton: uint32 vertex and edge counts, float32 × 3 positions,
// uint32 × 2 edges, then each attribute's values in info order.
func decodeSkeleton(inf *ngSkeletonInfo, b []byte) (*ngSkeleton, error) {
	le := binary.LittleEndian
	if len(b) < 8 {
		return nil, fmt.Errorf("%d bytes", len(b))
	}
	nv, ne := int(le.Uint32(b)), int(le.Uint32(b[4:]))
	off := 8
	if nv > len(b)/12 || ne > len(b)/8 || off+12*nv+8*ne > len(b) {
		return nil, fmt.Errorf("%d vertices and %d edges in %d bytes", nv, ne, len(b))
	}
	s := &ngSkeleton{Attrs: map[string][]float64{}}
	for i := range nv {
		var v [3]float32
		for k := range 3 {
			v[k] = math.Float32frombits(le.Uint32(b[off+12*i+4*k:]))
		}
		s.Vertices = append(s.Vertices, v)
	}
	off += 12 * nv
	for i := range ne {
		e := [2]uint32{le.Uint32(b[off+8*i:]), le.Uint32(b[off+8*i+4:])}
		if int(e[0]) >= nv || int(e[1]) >= nv {
			return nil, fmt.Errorf("edge %d = %v outside %d vertices", i, e, nv)
		}
		s.Edges = append(s.Edges, e)
	}
	off += 8 * ne
	for _, a := range inf.VertexAttributes {
		sz := size(a.DataType)
		n := nv * a.NumComponents
		if sz == 0 || off+sz*n > len(b) {
			return nil, fmt.Errorf("attribute %s (%s × %d) past the end", a.ID, a.DataType, a.NumComponents)
		}
		vals := make([]float64, n)
		for i := range vals {
			vals[i] = scalar(a.DataType, b[off+sz*i:])
		}
		s.Attrs[a.ID] = vals
		off += sz * n
	}
	if off != len(b) {
		return nil, fmt.Errorf("%d bytes, the skeleton takes %d", len(b), off)
	}
	return s, nil
}

func scalar(typ string, v []byte) float64 {
	le := binary.LittleEndian
	switch typ {
	case "uint8":
		return float64(v[0])
	case "int8":
		return float64(int8(v[0]))
	case "uint16":
		return float64(le.Uint16(v))
	case "int16":
		return float64(int16(le.Uint16(v)))
	case "uint32":
		return float64(le.Uint32(v))
	case "int32":
		return float64(int32(le.Uint32(v)))
	case "float32":
		return float64(math.Float32frombits(le.Uint32(v)))
	}
	return math.NaN()
}

type ngMesh struct {
	Vertices  [][3]float32
	Triangles [][3]uint32
}

// decodeMesh decodes a legacy mesh fragment: uint32 vertex count, float32
// × 3 positions, then uint32 × 3 triangles to the end.
func decodeMesh(b []byte) (*ngMesh, error) {
	le := binary.LittleEndian
	if len(b) < 4 {
		return nil, fmt.Errorf("%d bytes", len(b))
	}
	nv := int(le.Uint32(b))
	if nv > (len(b)-4)/12 {
		return nil, fmt.Errorf("%d vertices in %d bytes", nv, len(b))
	}
	rest := len(b) - 4 - 12*nv
	if rest%12 != 0 {
		return nil, fmt.Errorf("%d bytes of triangles", rest)
	}
	m := &ngMesh{}
	for i := range nv {
		var v [3]float32
		for k := range 3 {
			v[k] = math.Float32frombits(le.Uint32(b[4+12*i+4*k:]))
		}
		m.Vertices = append(m.Vertices, v)
	}
	for off := 4 + 12*nv; off < len(b); off += 12 {
		t := [3]uint32{le.Uint32(b[off:]), le.Uint32(b[off+4:]), le.Uint32(b[off+8:])}
		for _, v := range t {
			if int(v) >= nv {
				return nil, fmt.Errorf("triangle %v outside %d vertices", t, nv)
			}
		}
		m.Triangles = append(m.Triangles, t)
	}
	return m, nil
}

var _ = bytes.Equal
