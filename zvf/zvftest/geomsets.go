package zvftest

import (
	"slices"
	"strings"
)

// EdgeSet renders the edges of 3-D float32 vertices pos (12 bytes a row)
// as a sorted list of unordered pairs of coordinate rows, so that answers
// with the same edges in another order or direction compare equal.
func EdgeSet(pos []byte, edges []int64) []string {
	out := make([]string, 0, len(edges)/2)
	for i := 0; i+1 < len(edges); i += 2 {
		a, b := string(pos[12*edges[i]:12*edges[i]+12]), string(pos[12*edges[i+1]:12*edges[i+1]+12])
		if a > b {
			a, b = b, a
		}
		out = append(out, a+b)
	}
	slices.Sort(out)
	return out
}

// FaceSet renders faces of w corners over 3-D float32 vertices pos as a
// sorted list of corner-coordinate tuples, each rotated to start at its
// smallest corner: faces in another order or starting corner compare
// equal, a reversed winding does not.
func FaceSet(pos []byte, faces []int64, w int) []string {
	out := make([]string, 0, len(faces)/max(w, 1))
	corners := make([]string, w)
	for f := 0; f+w <= len(faces); f += w {
		k := 0
		for j := range w {
			corners[j] = string(pos[12*faces[f+j] : 12*faces[f+j]+12])
			if corners[j] < corners[k] {
				k = j
			}
		}
		var b strings.Builder
		for j := range w {
			b.WriteString(corners[(k+j)%w])
		}
		out = append(out, b.String())
	}
	slices.Sort(out)
	return out
}
