package api

import (
	"bufio"
	"encoding/binary"
	"math"
)

// stlCodec writes meshes as binary STL. STL has no shared vertices: each
// triangle carries its three corners (the store's coordinates, unchanged,
// as float32) and its unit normal (zero for a degenerate triangle); a
// face of more than three corners is split into a fan from its first
// corner. The header counts the triangles, so the answer is held until
// its end.
var stlCodec = exportCodec{name: "stl", mime: "model/stl", geoms: []string{"mesh"}, only3D: true, encoder: holding(writeSTL)}

// triangles is the face list split into triangles (fans), 3 indices each.
func triangles(faces []int64, width int) []int64 {
	if width == 3 || width == 0 {
		return faces
	}
	n := len(faces) / width
	out := make([]int64, 0, 3*n*(width-2))
	for f := range n {
		c := faces[f*width : (f+1)*width]
		for k := 1; k+1 < width; k++ {
			out = append(out, c[0], c[k], c[k+1])
		}
	}
	return out
}

func writeSTL(w *bufio.Writer, a *held) error {
	tri := triangles(a.faces, a.faceWidth)
	n := len(tri) / 3
	if int64(n) > math.MaxUint32 {
		return unrepresentable("more triangles than an STL header counts")
	}
	hdr := make([]byte, 84)
	// Not "solid…": readers would take the file for ASCII STL.
	copy(hdr, "zvfserve binary STL: the store's coordinates, unchanged")
	binary.LittleEndian.PutUint32(hdr[80:], uint32(n))
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	var rec [50]byte
	for t := range n {
		var p [3][3]float32
		for c := range 3 {
			q := point3(&a.verts, int(tri[3*t+c]))
			p[c] = [3]float32{float32(q[0]), float32(q[1]), float32(q[2])}
		}
		nrm := normal(p)
		for k := range 3 {
			binary.LittleEndian.PutUint32(rec[4*k:], math.Float32bits(nrm[k]))
		}
		for c := range 3 {
			for k := range 3 {
				binary.LittleEndian.PutUint32(rec[12+12*c+4*k:], math.Float32bits(p[c][k]))
			}
		}
		if _, err := w.Write(rec[:]); err != nil {
			return err
		}
	}
	return nil
}

// normal is a triangle's unit normal by the right-hand rule, or zero.
func normal(p [3][3]float32) [3]float32 {
	var u, v [3]float64
	for k := range 3 {
		u[k] = float64(p[1][k]) - float64(p[0][k])
		v[k] = float64(p[2][k]) - float64(p[0][k])
	}
	n := [3]float64{u[1]*v[2] - u[2]*v[1], u[2]*v[0] - u[0]*v[2], u[0]*v[1] - u[1]*v[0]}
	l := math.Sqrt(n[0]*n[0] + n[1]*n[1] + n[2]*n[2])
	if !(l > 0) || math.IsInf(l, 0) {
		return [3]float32{}
	}
	return [3]float32{float32(n[0] / l), float32(n[1] / l), float32(n[2] / l)}
}
