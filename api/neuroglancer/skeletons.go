package neuroglancer

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/zvfserve/zvfserve/api/neuroglancer/sharding"
	"github.com/zvfserve/zvfserve/zvf"
)

// skelAttr is one skeleton vertex attribute and its ZVF source.
type skelAttr struct {
	ID         string `json:"id"`
	DataType   string `json:"data_type"`
	Components int    `json:"num_components"`
	attr       string
}

// skeletonSpec is what a store's skeleton source serves.
type skeletonSpec struct {
	attrs     []skelAttr
	notes     []note
	transform []float64
	nm        []float64 // nanometres per store unit, per axis
	axisNotes []string
	segProps  bool // the object count allows an inline segment property list
}

// maxSegmentIDs bounds the ids a segment property list holds inline.
const maxSegmentIDs = 1_000_000

// maxSkeletonComponents is the most components a skeleton vertex attribute
// may have: Neuroglancer uploads each as a texture of 1 to 4 components
// (webgl/texture_access computeTextureFormat), and an info declaring more
// fails the whole skeleton layer.
const maxSkeletonComponents = 4

// skeletonAttr reports whether a vertex attribute can be a skeleton vertex
// attribute, and if not, why (the info's note).
func skeletonAttr(a zvf.AttrInfo) (typ string, converted bool, why string) {
	typ, converted, ok := numericType(a.DType)
	switch {
	case !ok:
		return "", false, fmt.Sprintf("left out: %s values have no skeleton attribute type", a.DType)
	case a.Channels > maxSkeletonComponents:
		return "", false, fmt.Sprintf("left out: %d channels; Neuroglancer's skeleton vertex attributes hold 1 to %d components", a.Channels, maxSkeletonComponents)
	}
	return typ, converted, ""
}

func newSkeletonSpec(st *zvf.Store, l0 *zvf.Level) *skeletonSpec {
	dims, axisNotes := dimensions(st.Info().Axes)
	sp := &skeletonSpec{nm: nanometresPer(dims), axisNotes: axisNotes, segProps: l0.Info().ObjectCount <= maxSegmentIDs}
	// Skeleton space is nanometres: the transform scales store units.
	sp.transform = []float64{sp.nm[0], 0, 0, 0, 0, sp.nm[1], 0, 0, 0, 0, sp.nm[2], 0}
	used := map[string]bool{}
	for _, a := range l0.Info().VertexAttributes {
		typ, converted, why := skeletonAttr(a)
		if why != "" {
			sp.notes = append(sp.notes, note{Attribute: a.Name, Note: why})
			continue
		}
		id := identifier(a.Name, "a", used)
		used[id] = true
		sp.attrs = append(sp.attrs, skelAttr{ID: id, DataType: typ, Components: max(a.Channels, 1), attr: a.Name})
		if converted {
			sp.notes = append(sp.notes, note{Attribute: a.Name, Property: id, Note: "converted: " + a.DType + " served as " + typ})
		}
	}
	return sp
}

func (sp *skeletonSpec) names() []string {
	var out []string
	for _, a := range sp.attrs {
		out = append(out, a.attr)
	}
	return out
}

type skeletonInfo struct {
	Type              string         `json:"@type"`
	Transform         []float64      `json:"transform"`
	VertexAttributes  []skelAttr     `json:"vertex_attributes"`
	SegmentProperties string         `json:"segment_properties,omitempty"`
	Sharding          *sharding.Spec `json:"sharding,omitempty"`
	ZVF               objectNotes    `json:"zvfserve"`
}

type objectNotes struct {
	Store      string   `json:"store"`
	Level      int      `json:"level"`
	Attributes []note   `json:"attributes"`
	Axes       []string `json:"axes"`
}

// infoJSON is the skeleton source's info, naming its segment properties
// at segProps; shards, when not nil, shards it.
func (sp *skeletonSpec) infoJSON(segProps string, st *zvf.Store, shards *sharding.Spec) ([]byte, error) {
	inf := skeletonInfo{Type: "neuroglancer_skeletons", Transform: sp.transform, VertexAttributes: append([]skelAttr{}, sp.attrs...), Sharding: shards,
		ZVF: objectNotes{Store: st.Name(), Attributes: append([]note{}, sp.notes...), Axes: append([]string{}, sp.axisNotes...)}}
	if sp.segProps {
		inf.SegmentProperties = segProps
	}
	return json.Marshal(inf)
}

// checkObject reports a missing object (no vertices at level 0) as 404.
func checkObject(ctx context.Context, store string, l0 *zvf.Level, id int64) error {
	ok, err := l0.HasObject(ctx, id)
	if err != nil {
		return err
	}
	if !ok {
		return notFoundf("store %q has no object %d", store, id)
	}
	return nil
}

// skeletonBytes encodes object id as a skeleton: its vertices in store
// units, its edges, and its vertex attributes in info order.
func (sp *skeletonSpec) skeletonBytes(ctx context.Context, store string, l0 *zvf.Level, id, limit int64) ([]byte, error) {
	if err := checkObject(ctx, store, l0, id); err != nil {
		return nil, err
	}
	o, err := l0.Object(ctx, id, sp.names())
	if err != nil {
		return nil, err
	}
	if limit > 0 && o.Count > limit {
		return nil, tooLargef("store %q: object %d has %d vertices, more than this server's %d per response", store, id, o.Count, limit)
	}
	ne := len(o.Edges) / 2
	out := make([]byte, 0, 8+12*int(o.Count)+8*ne)
	out = binary.LittleEndian.AppendUint32(out, uint32(o.Count))
	out = binary.LittleEndian.AppendUint32(out, uint32(ne))
	out = putFloat32s(out, &o.Vertices, 0, 3*int(o.Count))
	for _, v := range o.Edges[:2*ne] {
		out = binary.LittleEndian.AppendUint32(out, uint32(v))
	}
	for _, a := range sp.attrs {
		col := column(o.Attributes, a.attr)
		n := int(o.Count) * a.Components
		if col == nil || max(col.Channels, 1) != a.Components || len(col.Data) != n*col.ItemBytes() {
			return nil, corruptf("store %q level 0: object %d's attribute %s does not have %d × %d values", store, id, a.attr, o.Count, a.Components)
		}
		if col.DType == a.DataType {
			out = append(out, col.Data...)
			continue
		}
		var v [4]byte
		for i := range n {
			putNumber(v[:], a.DataType, col.At(i).Float64())
			out = append(out, v[:typeSize(a.DataType)]...)
		}
	}
	return out, nil
}

// meshBytes encodes object id as a legacy mesh fragment: the vertex count,
// the vertices in nanometres (the format has no transform) and the faces
// as triangles (a polygon as a fan).
func meshBytes(ctx context.Context, store string, l0 *zvf.Level, nm []float64, id, limit int64) ([]byte, error) {
	if err := checkObject(ctx, store, l0, id); err != nil {
		return nil, err
	}
	o, err := l0.Object(ctx, id, nil)
	if err != nil {
		return nil, err
	}
	if limit > 0 && o.Count > limit {
		return nil, tooLargef("store %q: object %d has %d vertices, more than this server's %d per response", store, id, o.Count, limit)
	}
	w := o.FaceWidth
	tris := 0
	if w >= 3 {
		tris = len(o.Faces) / w * (w - 2)
	}
	out := make([]byte, 0, 4+12*int(o.Count)+12*tris)
	out = binary.LittleEndian.AppendUint32(out, uint32(o.Count))
	for i := range int(o.Count) {
		for a := range 3 {
			v := o.Vertices.At(3*i+a).Float64() * nm[a]
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(float32(v)))
		}
	}
	if w >= 3 {
		for f := 0; f+w <= len(o.Faces); f += w {
			for k := 1; k+1 < w; k++ {
				for _, v := range [3]int64{o.Faces[f], o.Faces[f+k], o.Faces[f+k+1]} {
					out = binary.LittleEndian.AppendUint32(out, uint32(v))
				}
			}
		}
	}
	return out, nil
}

// segmentProperties lists level 0's objects with their object attributes
// as numbers and their groups as tags (neuroglancer_segment_properties).
func segmentProperties(ctx context.Context, l0 *zvf.Level) ([]byte, error) {
	type property struct {
		ID       string    `json:"id"`
		Type     string    `json:"type"`
		DataType string    `json:"data_type,omitempty"`
		Desc     string    `json:"description,omitempty"`
		Tags     []string  `json:"tags,omitempty"`
		Values   any       `json:"values"`
		numbers  []float64 // number properties, before conversion
		attr     string
		channel  int
	}
	info := l0.Info()
	var ids []int64
	for row := range info.ObjectCount {
		id, err := l0.ObjectIDAt(ctx, row)
		if err != nil {
			return nil, err
		}
		ok, err := l0.HasObject(ctx, id)
		if err != nil {
			return nil, err
		}
		if ok {
			ids = append(ids, id)
		}
	}
	var props []*property
	used := map[string]bool{}
	for _, a := range info.ObjectAttributes {
		typ, _, ok := numericType(a.DType)
		if !ok || a.Channels > maxChannels {
			continue
		}
		for c := range max(a.Channels, 1) {
			name := a.Name
			if a.Channels > 1 {
				name = fmt.Sprintf("%s_%d", a.Name, c)
			}
			id := identifier(name, "a", used)
			used[id] = true
			props = append(props, &property{ID: id, Type: "number", DataType: typ, Desc: "ZVF object attribute " + a.Name, attr: a.Name, channel: c})
		}
	}
	for _, id := range ids {
		cols, err := l0.ObjectAttributes(ctx, id)
		if err != nil {
			return nil, err
		}
		for _, p := range props {
			v := math.NaN()
			if col := column(cols, p.attr); col != nil && col.ItemBytes() > 0 && (p.channel+1)*col.ItemBytes() <= len(col.Data) {
				v = col.At(p.channel).Float64()
			}
			p.numbers = append(p.numbers, v)
		}
	}
	for _, p := range props {
		// JSON has no NaN: an object without the attribute shows 0.
		vals := make([]float64, len(p.numbers))
		for i, v := range p.numbers {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				vals[i] = v
				if p.DataType == "float32" {
					vals[i] = float64(float32(v))
				}
			}
		}
		p.Values = vals
	}
	if g := info.GroupCount; g > 0 && g <= 256 {
		at := make(map[int64]int, len(ids))
		for i, id := range ids {
			at[id] = i
		}
		tags := &property{ID: identifier("groups", "a", used), Type: "tags", Desc: "the ZVF groups that hold the object"}
		values := make([][]int, len(ids))
		for gi := range g {
			members, err := l0.Group(ctx, gi)
			if err != nil {
				return nil, err
			}
			tags.Tags = append(tags.Tags, fmt.Sprintf("group_%d", gi))
			for _, m := range members {
				if i, ok := at[m]; ok {
					values[i] = append(values[i], int(gi))
				}
			}
		}
		for i := range values {
			if values[i] == nil {
				values[i] = []int{}
			}
		}
		tags.Values = values
		props = append(props, tags)
	}
	strIDs := make([]string, len(ids))
	for i, id := range ids {
		strIDs[i] = segmentID(id)
	}
	out := map[string]any{"@type": "neuroglancer_segment_properties", "inline": map[string]any{"ids": strIDs, "properties": nonNilProps(props)}}
	return json.Marshal(out)
}

// segmentID is object id as Neuroglancer's uint64 segment id, in decimal:
// the id of the same bits, as the routes (parseID) and the relationship
// lists take it (an int64 id below 0 is a segment id of 2^63 or more).
func segmentID(id int64) string { return strconv.FormatUint(uint64(id), 10) }

func nonNilProps[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}
