package api

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/zvfserve/zvfserve/zvf"
)

// glbCodec writes meshes as binary glTF 2.0: one mesh whose POSITION
// accessor holds every vertex of the answer in answer order, none welded
// or dropped (its count is the answer's count), with the store's
// coordinates unchanged (float32), and whose indices are the answer's
// faces (more corners than three split into fans); an answer without
// faces is a POINTS primitive. glTF measures in metres with named axes,
// so the change from the store's space is the node's matrix, never the
// data: a scale from the axes' unit to metres (when the axes share a
// known unit) and a permutation when the axes are named x, y, z in
// another order. The buffer's length leads the file, so the answer is
// held until its end.
var glbCodec = exportCodec{name: "glb", mime: "model/gltf-binary", geoms: []string{"mesh"}, only3D: true, encoder: holding(writeGLB)}

// metres is the length of a unit (a UDUNITS name, as NGFF axes carry) in
// metres; ok false for a unit not listed.
func metres(unit string) (float64, bool) {
	v, ok := map[string]float64{
		"angstrom": 1e-10, "nanometer": 1e-9, "micrometer": 1e-6, "millimeter": 1e-3,
		"centimeter": 1e-2, "meter": 1, "kilometer": 1e3,
	}[strings.ToLower(unit)]
	return v, ok
}

// glbMatrix is the node matrix (column-major) taking the store's space to
// glTF's, or nil for the identity.
func glbMatrix(axes []zvf.Axis) []float64 {
	scale := 1.0
	if s, ok := metres(axisUnit(axes)); ok {
		scale = s
	}
	perm := [3]int{0, 1, 2}
	if len(axes) == 3 {
		seen := map[int]bool{}
		var p [3]int
		for i, a := range axes {
			j := strings.Index("xyz", strings.ToLower(a.Name))
			if len(a.Name) != 1 || j < 0 || seen[j] {
				seen = nil
				break
			}
			seen[j], p[i] = true, j
		}
		if seen != nil {
			perm = p
		}
	}
	if scale == 1 && perm == [3]int{0, 1, 2} {
		return nil
	}
	m := make([]float64, 16)
	for col, row := range perm {
		m[4*col+row] = scale
	}
	m[15] = 1
	return m
}

type gltfDoc struct {
	Asset       map[string]string `json:"asset"`
	Scene       int               `json:"scene"`
	Scenes      []map[string]any  `json:"scenes"`
	Nodes       []map[string]any  `json:"nodes,omitempty"`
	Meshes      []map[string]any  `json:"meshes,omitempty"`
	Accessors   []map[string]any  `json:"accessors,omitempty"`
	BufferViews []map[string]any  `json:"bufferViews,omitempty"`
	Buffers     []map[string]any  `json:"buffers,omitempty"`
}

// exactFloat32 is a float32 as a JSON number that reads back as the same
// float64 (accessor bounds are compared with the data as read).
type exactFloat32 float32

func (f exactFloat32) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, float64(f), 'g', -1, 64), nil
}

func writeGLB(w *bufio.Writer, a *held) error {
	n := a.rows
	tri := triangles(a.faces, a.faceWidth)
	doc := gltfDoc{
		Asset:  map[string]string{"version": "2.0", "generator": "zvfserve"},
		Scenes: []map[string]any{{}},
	}
	var bin []byte
	if n > 0 {
		if int64(n) > math.MaxUint32 {
			return unrepresentable("more vertices than glTF indices reach")
		}
		bin = make([]byte, 0, 12*n+4*len(tri))
		lo := [3]float32{float32(math.Inf(1)), float32(math.Inf(1)), float32(math.Inf(1))}
		hi := [3]float32{float32(math.Inf(-1)), float32(math.Inf(-1)), float32(math.Inf(-1))}
		for i := range n {
			q := point3(&a.verts, i)
			for k := range 3 {
				v := float32(q[k])
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					return unrepresentable("a vertex coordinate is not a finite float32; glTF positions must be")
				}
				lo[k], hi[k] = min(lo[k], v), max(hi[k], v)
				bin = binary.LittleEndian.AppendUint32(bin, math.Float32bits(v))
			}
		}
		for _, v := range tri {
			bin = binary.LittleEndian.AppendUint32(bin, uint32(v))
		}
		node := map[string]any{"mesh": 0, "name": "zvfserve export"}
		if m := glbMatrix(a.m.Export.axes); m != nil {
			node["matrix"] = m
		}
		doc.Scenes[0]["nodes"] = []int{0}
		doc.Nodes = []map[string]any{node}
		doc.Buffers = []map[string]any{{"byteLength": len(bin)}}
		doc.BufferViews = []map[string]any{{"buffer": 0, "byteOffset": 0, "byteLength": 12 * n, "target": 34962}}
		doc.Accessors = []map[string]any{{"bufferView": 0, "componentType": 5126, "count": n, "type": "VEC3",
			"min": []exactFloat32{exactFloat32(lo[0]), exactFloat32(lo[1]), exactFloat32(lo[2])},
			"max": []exactFloat32{exactFloat32(hi[0]), exactFloat32(hi[1]), exactFloat32(hi[2])}}}
		prim := map[string]any{"attributes": map[string]int{"POSITION": 0}, "mode": 0}
		if len(tri) > 0 {
			doc.BufferViews = append(doc.BufferViews, map[string]any{"buffer": 0, "byteOffset": 12 * n, "byteLength": 4 * len(tri), "target": 34963})
			doc.Accessors = append(doc.Accessors, map[string]any{"bufferView": 1, "componentType": 5125, "count": len(tri), "type": "SCALAR"})
			prim["indices"], prim["mode"] = 1, 4
		}
		doc.Meshes = []map[string]any{{"primitives": []any{prim}}}
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	for len(js)%4 != 0 {
		js = append(js, ' ')
	}
	total := 12 + 8 + len(js)
	if len(bin) > 0 {
		total += 8 + len(bin) // bin is whole 4-byte words already
	}
	if int64(total) > math.MaxUint32 {
		return unrepresentable("the answer is larger than a GLB file holds (4 GiB)")
	}
	var head [20]byte
	copy(head[0:], "glTF")
	binary.LittleEndian.PutUint32(head[4:], 2)
	binary.LittleEndian.PutUint32(head[8:], uint32(total))
	binary.LittleEndian.PutUint32(head[12:], uint32(len(js)))
	copy(head[16:], "JSON")
	if _, err := w.Write(head[:]); err != nil {
		return err
	}
	if _, err := w.Write(js); err != nil {
		return err
	}
	if len(bin) == 0 {
		return nil
	}
	var bh [8]byte
	binary.LittleEndian.PutUint32(bh[0:], uint32(len(bin)))
	copy(bh[4:], "BIN\x00")
	if _, err := w.Write(bh[:]); err != nil {
		return err
	}
	_, err = w.Write(bin)
	return err
}
