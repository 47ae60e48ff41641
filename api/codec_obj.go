package api

import (
	"bufio"
	"strconv"
	"strings"
)

// objCodec writes meshes as Wavefront OBJ: a v line per vertex of the
// answer, in answer order, none welded or dropped (v count = the answer's
// count), with the store's coordinates unchanged in the store's axis
// order, at full precision; then an f line per face (1-based indices, a
// face of more corners than three as it is). Faces come after all
// vertices, so the answer is held until its end.
var objCodec = exportCodec{name: "obj", mime: "model/obj", compress: true, geoms: []string{"mesh"}, only3D: true, encoder: holding(writeOBJ)}

func writeOBJ(w *bufio.Writer, a *held) error {
	m := a.m
	hdr := "# zvfserve OBJ export: " + strings.ReplaceAll(m.Export.source, "\n", " ") + "\n" +
		"# v: the store's " + strings.Join(axisNames(m.Export.axes, 3), ", ") + " coordinates, unchanged"
	if u := axisUnit(m.Export.axes); u != "" {
		hdr += " (" + u + ")"
	}
	hdr += "; f: the answer's faces, 1-based\n"
	if _, err := w.WriteString(hdr); err != nil {
		return err
	}
	var buf []byte
	for i := 0; i < a.rows; i++ {
		buf = append(buf[:0], 'v')
		for k := range 3 {
			buf = append(buf, ' ')
			buf = appendNumber(buf, &a.verts, 3*i+k)
		}
		buf = append(buf, '\n')
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	fw := a.faceWidth
	for f := 0; fw > 0 && f < len(a.faces)/fw; f++ {
		buf = append(buf[:0], 'f')
		for _, v := range a.faces[f*fw : (f+1)*fw] {
			buf = append(buf, ' ')
			buf = strconv.AppendInt(buf, v+1, 10)
		}
		buf = append(buf, '\n')
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}
