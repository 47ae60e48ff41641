package dracotest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// ReadPLY reads the binary PLY draco_decoder writes for an int32 position
// attribute: "element vertex N" with int x, y, z, then "element face F"
// with a uchar-counted int list.
func ReadPLY(b []byte) (numPoints int, pos, faces []uint32, err error) {
	end := bytes.Index(b, []byte("end_header\n"))
	if end < 0 {
		return 0, nil, nil, fmt.Errorf("no end_header")
	}
	header := string(b[:end])
	body := b[end+len("end_header\n"):]
	var nf int
	want := []string{"ply", "format binary_little_endian 1.0", "element vertex", "property int x",
		"property int y", "property int z", "element face", "property list uchar int vertex_indices"}
	lines := strings.Split(strings.TrimSpace(header), "\n")
	if len(lines) != len(want) {
		return 0, nil, nil, fmt.Errorf("header %q", header)
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, want[i]) {
			return 0, nil, nil, fmt.Errorf("header line %q, want %q", l, want[i])
		}
		switch want[i] {
		case "element vertex":
			numPoints, err = strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(l, want[i])))
		case "element face":
			nf, err = strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(l, want[i])))
		}
		if err != nil {
			return 0, nil, nil, err
		}
	}
	if len(body) != 12*numPoints+13*nf {
		return 0, nil, nil, fmt.Errorf("%d body bytes for %d vertices and %d faces", len(body), numPoints, nf)
	}
	pos = make([]uint32, 3*numPoints)
	for i := range pos {
		pos[i] = binary.LittleEndian.Uint32(body[4*i:])
	}
	body = body[12*numPoints:]
	faces = make([]uint32, 0, 3*nf)
	for i := range nf {
		rec := body[13*i:]
		if rec[0] != 3 {
			return 0, nil, nil, fmt.Errorf("face %d has %d corners", i, rec[0])
		}
		faces = append(faces, binary.LittleEndian.Uint32(rec[1:]), binary.LittleEndian.Uint32(rec[5:]), binary.LittleEndian.Uint32(rec[9:]))
	}
	return numPoints, pos, faces, nil
}
