package api

import (
	"bufio"
	"encoding/binary"
	"math"
	"strconv"
	"strings"
)

// tckCodec writes streamlines as MRtrix TCK (Float32LE): TCK points are
// RAS+ mm, which the store's coordinates are (ZVF keeps world
// coordinates, taken as mm), so they are written unchanged (a float64
// store's rounded to float32, the only type nibabel reads); streamlines
// as for TRK (streamlineRuns), each ended by a NaN point, the file by an
// infinite one. The header counts the streamlines, so the answer is held
// until its end.
var tckCodec = exportCodec{name: "tck", mime: "application/octet-stream", geoms: streamlineGeometries, only3D: true, encoder: holding(writeTCK)}

// tckHeader is the text header; its file: line gives the offset of the
// data, right after END.
func tckHeader(source, unit string, count int) []byte {
	oneLine := func(s string) string { return strings.NewReplacer("\n", " ", "\r", " ").Replace(s) }
	units := "the store's coordinates, taken as mm"
	if unit != "" {
		units += " (the store's axes are in " + unit + ")"
	}
	head := "mrtrix tracks\n" +
		"count: " + strconv.Itoa(count) + "\n" +
		"datatype: Float32LE\n" +
		"zvfserve_source: " + oneLine(source) + "\n" +
		"zvfserve_units: " + oneLine(units) + "\n"
	// The offset counts its own digits: grow it until it is stable.
	off := len(head)
	for {
		tail := "file: . " + strconv.Itoa(off) + "\nEND\n"
		if len(head)+len(tail) == off {
			return []byte(head + tail)
		}
		off = len(head) + len(tail)
	}
}

func writeTCK(w *bufio.Writer, a *held) error {
	// TCK's NaN point ends a streamline and its infinite one the file:
	// a coordinate that is not a finite float32 would be read as either.
	for i := range 3 * a.rows {
		if v := float64(float32(float(&a.verts, i))); math.IsNaN(v) || math.IsInf(v, 0) {
			return unrepresentable("a vertex coordinate is not a finite float32; TCK reads a NaN point as a streamline's end and an infinite one as the file's (f=trk or f=json hold it)")
		}
	}
	order, offs := streamlineRuns(a.rows, a.edges)
	if _, err := w.Write(tckHeader(a.m.Export.source, axisUnit(a.m.Export.axes), len(offs)-1)); err != nil {
		return err
	}
	nan, inf := math.Float32bits(float32(math.NaN())), math.Float32bits(float32(math.Inf(1)))
	var buf []byte
	for s := 0; s+1 < len(offs); s++ {
		buf = buf[:0]
		for _, v := range order[offs[s]:offs[s+1]] {
			for k := range 3 {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(float32(float(&a.verts, 3*int(v)+k))))
			}
		}
		for range 3 {
			buf = binary.LittleEndian.AppendUint32(buf, nan)
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	buf = buf[:0]
	for range 3 {
		buf = binary.LittleEndian.AppendUint32(buf, inf)
	}
	_, err := w.Write(buf)
	return err
}
