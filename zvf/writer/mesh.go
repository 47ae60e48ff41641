package writer

import (
	"context"
	"slices"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// Mesh is the input of WriteMesh: Faces holds FaceWidth vertex indices per
// face (3 for triangles).
type Mesh struct {
	Positions        []float32
	Faces            []int64
	FaceWidth        int
	ObjectIDs        []int64     // optional, per vertex (default: all 0)
	Attributes       []Attribute // per vertex
	ObjectAttributes []Attribute
	// FragmentPerObject splits each chunk into one fragment per object
	// (ascending id) so an object's manifest names only its own rows. The
	// reference writes one fragment per chunk that every object in the
	// chunk names (zvf-format.md §5.5), which makes object reads return
	// neighbours' vertices; leave this false to reproduce it exactly.
	FragmentPerObject bool
}

// WriteMesh writes a triangle (or polygon) mesh store: intra-chunk faces in
// links/0 with chunk-local rows, faces spanning chunks as
// cross_chunk_links/0 records of FaceWidth endpoints.
func WriteMesh(ctx context.Context, w storage.Writer, prefix string, m *Mesh, o Options) (*Summary, error) {
	g, err := prepare(&o, m.Positions, "mesh", "explicit")
	if err != nil {
		return nil, err
	}
	d := g.d
	n := len(m.Positions) / d
	fw := m.FaceWidth
	if fw < 3 || fw > 64 {
		return nil, inputErr("Mesh.FaceWidth", -1, "%d is not in [3, 64]", fw)
	}
	if len(m.Faces)%fw != 0 {
		return nil, inputErr("Mesh.Faces", -1, "%d indices is not a multiple of face width %d", len(m.Faces), fw)
	}
	for i, v := range m.Faces {
		if v < 0 || v >= int64(n) {
			return nil, inputErr("Mesh.Faces", i/fw, "vertex %d out of range [0, %d)", v, n)
		}
	}
	if err := checkAttrs("Mesh.Attributes", m.Attributes, n); err != nil {
		return nil, err
	}
	ids, nobj, err := graphObjects("Mesh.ObjectIDs", m.ObjectIDs, n, m.ObjectAttributes)
	if err != nil {
		return nil, err
	}
	l := &level{d: d, pos: m.Positions, vattrs: m.Attributes, hasObjects: true, linkWidth: fw, cclGroup: true,
		cclWidth: fw, oattrs: m.ObjectAttributes}
	if m.FragmentPerObject {
		l.chunks, l.manifests = chunkByObject(g, m.Positions, ids, nobj)
	} else {
		l.chunks, l.manifests = chunkWhole(g, m.Positions, ids, nobj)
	}
	l.addFaces(m.Faces, fw)
	return run(ctx, w, prefix, &o, g, l)
}

// addFaces splits faces into per-chunk links/0 rows and cross-chunk
// records of fw endpoints, both in face order.
func (l *level) addFaces(faces []int64, fw int) {
	d := l.d
	chunkOf, local := rowIndex(l.chunks, len(l.pos)/d)
	for f := 0; f < len(faces)/fw; f++ {
		face := faces[f*fw : f*fw+fw]
		c0 := chunkOf[face[0]]
		same := true
		for _, v := range face[1:] {
			same = same && chunkOf[v] == c0
		}
		if same {
			c := &l.chunks[c0]
			for _, v := range face {
				c.links = append(c.links, int64(local[v]))
			}
			c.linkSrc = append(c.linkSrc, uint32(f))
			continue
		}
		for _, v := range face {
			l.ccl = append(l.ccl, l.chunks[chunkOf[v]].c[:d]...)
			l.ccl = append(l.ccl, int64(local[v]))
		}
	}
}

// chunkWhole is the reference mesh layout: one fragment holding the whole
// chunk (rows in input order), named by every object present in it.
func chunkWhole(g *geom, pos []float32, ids []int64, nobj int) ([]chunkData, [][]fragRef) {
	bk := byCell(pos, g.d, g.chunk)
	chunks := make([]chunkData, len(bk.keys))
	manifests := make([][]fragRef, nobj)
	for ci, k := range bk.keys {
		rows := bk.order[bk.start[ci]:bk.start[ci+1]]
		chunks[ci] = chunkData{c: k, rows: rows, frags: []int64{int64(len(rows))}}
		present := make([]int64, len(rows))
		for j, r := range rows {
			present[j] = ids[r]
		}
		slices.Sort(present)
		for _, oid := range slices.Compact(present) {
			manifests[oid] = append(manifests[oid], fragRef{int32(ci), 0})
		}
	}
	return chunks, manifests
}
