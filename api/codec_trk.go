package api

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/zvfserve/zvfserve/api/problem"
	"github.com/zvfserve/zvfserve/zvf"
)

// trkCodec writes streamlines as TrackVis TRK (version 2, little-endian),
// such that nibabel.streamlines.load(f).streamlines (RAS+ mm) gives the
// store's coordinates back: the store's coordinates are RAS+ mm (ZVF keeps
// world coordinates), and each point is written in TrackVis voxmm space
// of the header's voxel grid, ((vox_to_ras⁻¹ · p) + 0.5) × voxel_size, as
// nibabel.streamlines.save writes it. The voxel grid is the store's
// when it carries one (storeTrkSpace), else the identity with 1 mm voxels
// (the store's units taken as mm), voxel order RAS. One streamline per run
// of consecutive edges in the answer (streamlineRuns), in the order of
// their first rows. The header counts the streamlines, so the answer is
// held until its end.
//
// A page is never a file of its own: a streamline would be cut at each
// page's end.
var trkCodec = exportCodec{name: "trk", mime: "application/octet-stream", geoms: streamlineGeometries, only3D: true, encoder: holding(writeTRK)}

// streamlineGeometries are the geometry names of polyline stores.
var streamlineGeometries = []string{"streamline", "polyline", "line"}

// trkSpace is the voxel grid of a TRK file.
type trkSpace struct {
	vox2ras   [4][4]float64 // as written (float32 values)
	ras2vox   [4][4]float64
	voxelSize [3]float64 // as written (float32 values)
	dims      [3]int16
	order     [3]byte // voxel order, e.g. RAS
	from      string  // the store header it came from; "" for the identity
}

// identityTrkSpace is the grid of a store without a transform.
func identityTrkSpace() *trkSpace {
	sp := &trkSpace{voxelSize: [3]float64{1, 1, 1}, dims: [3]int16{1, 1, 1}, order: [3]byte{'R', 'A', 'S'}}
	for i := range 4 {
		sp.vox2ras[i][i], sp.ras2vox[i][i] = 1, 1
	}
	return sp
}

// storeTrkSpace is the voxel grid a store's headers give: headers/trk
// (vox_to_ras, voxel_size, dimensions, as zarr-vectors-tools keeps a
// TRK file's header) or else headers/nifti (affine, voxel_sizes,
// dimensions); else the identity. Nothing else counts as a transform: the
// NGFF multiscales scale and translation describe the pyramid's bins, not
// the coordinates. A TRK header whose space is voxmm (the store holds the
// file's TrackVis coordinates, not RAS+ mm) is refused: a streamline
// export of it could not give the store's coordinates back.
func storeTrkSpace(ctx context.Context, st *zvf.Store) (*trkSpace, error) {
	raw, ok, err := st.SourceHeader(ctx, "trk")
	if err != nil {
		return nil, err
	}
	if ok {
		var h struct {
			VoxToRAS   []float64 `json:"vox_to_ras"`
			VoxelSize  []float64 `json:"voxel_size"`
			Dimensions []float64 `json:"dimensions"`
			Space      string    `json:"space"`
		}
		if err := json.Unmarshal(raw, &h); err != nil {
			return nil, badHeader("trk", err.Error())
		}
		if h.Space != "" && h.Space != "rasmm" {
			return nil, problem.New(problem.Unsupported, fmt.Sprintf("headers/trk says the store's coordinates are in %q space; streamline exports write RAS+ mm coordinates only", h.Space))
		}
		if h.VoxToRAS != nil {
			return newTrkSpace("headers/trk", h.VoxToRAS, h.VoxelSize, h.Dimensions)
		}
	}
	raw, ok, err = st.SourceHeader(ctx, "nifti")
	if err != nil {
		return nil, err
	}
	if ok {
		var h struct {
			Affine     []float64 `json:"affine"`
			VoxelSizes []float64 `json:"voxel_sizes"`
			Dimensions []float64 `json:"dimensions"`
		}
		if err := json.Unmarshal(raw, &h); err != nil {
			return nil, badHeader("nifti", err.Error())
		}
		if h.Affine != nil {
			return newTrkSpace("headers/nifti", h.Affine, h.VoxelSizes, h.Dimensions)
		}
	}
	return identityTrkSpace(), nil
}

func badHeader(format, why string) *Problem {
	return problem.New(problem.CorruptData, "headers/"+format+" is not a usable voxel-to-RAS transform: "+why)
}

// newTrkSpace checks a header's affine (16 numbers, row-major, last row
// 0 0 0 1, invertible), voxel sizes (3 positive numbers; else the
// affine's column lengths) and dimensions (3 integers 1…32767; else 1).
func newTrkSpace(from string, affine, voxel, dims []float64) (*trkSpace, error) {
	sp := &trkSpace{from: from, dims: [3]int16{1, 1, 1}}
	if len(affine) != 16 {
		return nil, badHeader(from[len("headers/"):], fmt.Sprintf("%d affine values, not 16", len(affine)))
	}
	for i, v := range affine {
		f := float64(float32(v)) // TRK keeps float32: compute with what nibabel will read
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, badHeader(from[len("headers/"):], "an affine value is not finite")
		}
		sp.vox2ras[i/4][i%4] = f
	}
	if r := sp.vox2ras[3]; r != [4]float64{0, 0, 0, 1} {
		return nil, badHeader(from[len("headers/"):], fmt.Sprintf("the affine's last row is %v, not 0 0 0 1", r))
	}
	inv, ok := invert3x4(sp.vox2ras)
	if !ok {
		return nil, badHeader(from[len("headers/"):], "the affine is singular")
	}
	sp.ras2vox = inv
	for i := range 3 {
		v := 0.0
		if len(voxel) == 3 {
			v = float64(float32(voxel[i]))
		}
		if !(v > 0) || math.IsInf(v, 0) {
			v = float64(float32(math.Sqrt(sp.vox2ras[0][i]*sp.vox2ras[0][i] + sp.vox2ras[1][i]*sp.vox2ras[1][i] + sp.vox2ras[2][i]*sp.vox2ras[2][i])))
		}
		sp.voxelSize[i] = v
		if len(dims) == 3 && dims[i] >= 1 && dims[i] <= math.MaxInt16 && dims[i] == math.Trunc(dims[i]) {
			sp.dims[i] = int16(dims[i])
		}
	}
	sp.order = axisCodes(sp.vox2ras)
	return sp, nil
}

// invert3x4 inverts an affine whose last row is 0 0 0 1.
func invert3x4(a [4][4]float64) ([4][4]float64, bool) {
	var out [4][4]float64
	m := a
	det := m[0][0]*(m[1][1]*m[2][2]-m[1][2]*m[2][1]) - m[0][1]*(m[1][0]*m[2][2]-m[1][2]*m[2][0]) + m[0][2]*(m[1][0]*m[2][1]-m[1][1]*m[2][0])
	if det == 0 || math.IsNaN(det) || math.IsInf(det, 0) {
		return out, false
	}
	out[0][0] = (m[1][1]*m[2][2] - m[1][2]*m[2][1]) / det
	out[0][1] = (m[0][2]*m[2][1] - m[0][1]*m[2][2]) / det
	out[0][2] = (m[0][1]*m[1][2] - m[0][2]*m[1][1]) / det
	out[1][0] = (m[1][2]*m[2][0] - m[1][0]*m[2][2]) / det
	out[1][1] = (m[0][0]*m[2][2] - m[0][2]*m[2][0]) / det
	out[1][2] = (m[0][2]*m[1][0] - m[0][0]*m[1][2]) / det
	out[2][0] = (m[1][0]*m[2][1] - m[1][1]*m[2][0]) / det
	out[2][1] = (m[0][1]*m[2][0] - m[0][0]*m[2][1]) / det
	out[2][2] = (m[0][0]*m[1][1] - m[0][1]*m[1][0]) / det
	for i := range 3 {
		out[i][3] = -(out[i][0]*m[0][3] + out[i][1]*m[1][3] + out[i][2]*m[2][3])
	}
	out[3][3] = 1
	for i := range 3 {
		for j := range 4 {
			if math.IsNaN(out[i][j]) || math.IsInf(out[i][j], 0) {
				return out, false
			}
		}
	}
	return out, true
}

// axisCodes is the voxel order of an affine as nibabel's aff2axcodes
// finds it: the closest rotation (the orthogonal polar factor of the
// column-normalised 3×3 part), then, axis by axis, the world axis it
// points along most and its sign. Writing this order makes nibabel apply
// the affine as it is, with no reorientation.
func axisCodes(a [4][4]float64) [3]byte {
	var r [3][3]float64
	for j := range 3 {
		n := math.Sqrt(a[0][j]*a[0][j] + a[1][j]*a[1][j] + a[2][j]*a[2][j])
		if n == 0 {
			n = 1
		}
		for i := range 3 {
			r[i][j] = a[i][j] / n
		}
	}
	// Newton's iteration for the polar factor: X ← (X + X⁻ᵀ)/2.
	for range 100 {
		inv, ok := invert3x4([4][4]float64{{r[0][0], r[0][1], r[0][2]}, {r[1][0], r[1][1], r[1][2]}, {r[2][0], r[2][1], r[2][2]}, {0, 0, 0, 1}})
		if !ok {
			break
		}
		diff := 0.0
		for i := range 3 {
			for j := range 3 {
				v := (r[i][j] + inv[j][i]) / 2
				diff = max(diff, math.Abs(v-r[i][j]))
				r[i][j] = v
			}
		}
		if diff < 1e-15 {
			break
		}
	}
	codes := [3][2]byte{{'L', 'R'}, {'P', 'A'}, {'I', 'S'}}
	var out [3]byte
	for j := range 3 {
		best := 0
		for i := 1; i < 3; i++ {
			if math.Abs(r[i][j]) > math.Abs(r[best][j]) {
				best = i
			}
		}
		if r[best][j] < 0 {
			out[j] = codes[best][0]
		} else {
			out[j] = codes[best][1]
		}
		for k := range 3 {
			r[best][k] = 0
		}
	}
	return out
}

// voxmm is a RAS+ mm point in the grid's TrackVis voxmm space.
func (sp *trkSpace) voxmm(p [3]float64) [3]float32 {
	var out [3]float32
	for i := range 3 {
		v := sp.ras2vox[i][0]*p[0] + sp.ras2vox[i][1]*p[1] + sp.ras2vox[i][2]*p[2] + sp.ras2vox[i][3]
		out[i] = float32((v + 0.5) * sp.voxelSize[i])
	}
	return out
}

// trkHeader is the 1000-byte TRK header (version 2).
func trkHeader(sp *trkSpace, count int) []byte {
	h := make([]byte, 1000)
	copy(h[0:], "TRACK")
	le := binary.LittleEndian
	for i := range 3 {
		le.PutUint16(h[6+2*i:], uint16(sp.dims[i]))
		le.PutUint32(h[12+4*i:], math.Float32bits(float32(sp.voxelSize[i])))
	}
	for i := range 4 {
		for j := range 4 {
			le.PutUint32(h[440+4*(4*i+j):], math.Float32bits(float32(sp.vox2ras[i][j])))
		}
	}
	copy(h[948:952], sp.order[:])
	le.PutUint32(h[988:], uint32(count))
	le.PutUint32(h[992:], 2)
	le.PutUint32(h[996:], 1000)
	return h
}

func writeTRK(w *bufio.Writer, a *held) error {
	order, offs := streamlineRuns(a.rows, a.edges)
	sp := a.m.Export.trk
	if sp == nil {
		sp = identityTrkSpace()
	}
	if len(offs)-1 > math.MaxInt32 {
		return unrepresentable("more streamlines than a TRK header counts")
	}
	if _, err := w.Write(trkHeader(sp, len(offs)-1)); err != nil {
		return err
	}
	var buf []byte
	for s := 0; s+1 < len(offs); s++ {
		run := order[offs[s]:offs[s+1]]
		buf = binary.LittleEndian.AppendUint32(buf[:0], uint32(len(run)))
		for _, v := range run {
			q := sp.voxmm(point3(&a.verts, int(v)))
			for _, c := range q {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(c))
			}
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

// point3 is row v of a three-channel vertex column.
func point3(c *zvf.Column, v int) [3]float64 {
	return [3]float64{float(c, 3*v), float(c, 3*v+1), float(c, 3*v+2)}
}

// streamlineRuns splits an answer's n rows into streamlines. Each edge
// (a, b) says that b follows a on a line, so a streamline is a run of
// consecutive edges: a line that leaves the box and comes back is two, and
// a row without edges is a streamline of one point. Every edge is in
// exactly one streamline. On coarse levels a metavertex can be shared by
// lines (or visited twice by one); such a row is in every streamline
// through it, and a closed run is a streamline ending where it began. Runs
// start, in row order, at the rows more edges leave than reach (one run
// per extra edge), then at the first row of each closed run; each follows
// the first unused edge, in answer order. The result is ordered by first
// row; order lists the rows of run s at order[offs[s]:offs[s+1]].
func streamlineRuns(n int, edges []int64) (order, offs []int32) {
	ne := len(edges) / 2
	start := make([]int32, n+1) // out-edges of v: out[start[v]:start[v+1]], in answer order
	in := make([]int32, n)
	for e := range ne {
		start[edges[2*e]+1]++
		in[edges[2*e+1]]++
	}
	for v := range n {
		start[v+1] += start[v]
	}
	out := make([]int32, ne)
	next := slices.Clone(start[:n]) // the next unused out-edge of v
	for e := range ne {
		a := edges[2*e]
		out[next[a]] = int32(edges[2*e+1])
		next[a]++
	}
	copy(next, start[:n])
	type run struct{ first, lo, hi int32 }
	var runs []run
	order = make([]int32, 0, n+ne)
	follow := func(v int32) {
		lo := int32(len(order))
		order = append(order, v)
		for next[v] < start[v+1] {
			w := out[next[v]]
			next[v]++
			order = append(order, w)
			v = w
		}
		runs = append(runs, run{order[lo], lo, int32(len(order))})
	}
	for v := range int32(n) {
		deg := start[v+1] - start[v]
		if deg == 0 && in[v] == 0 {
			follow(v) // a lone row
		}
		for k := in[v]; k < deg; k++ {
			follow(v)
		}
	}
	for v := range int32(n) {
		for next[v] < start[v+1] {
			follow(v) // closed runs: what is left is balanced
		}
	}
	slices.SortStableFunc(runs, func(a, b run) int { return cmp.Compare(a.first, b.first) })
	sorted := make([]int32, 0, len(order))
	offs = make([]int32, 1, len(runs)+1)
	for _, r := range runs {
		sorted = append(sorted, order[r.lo:r.hi]...)
		offs = append(offs, int32(len(sorted)))
	}
	return sorted, offs
}
