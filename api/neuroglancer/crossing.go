package neuroglancer

import (
	"math"
	"sort"
	"strconv"

	"github.com/zvfserve/zvfserve/zvf"
)

// Neuroglancer loads only the spatial cells a view intersects, so a line
// or polyline is filed in every cell of its level that one of its
// segments passes through, not only in the cells of its vertices. The
// cells a segment passes through between its ends' are found once, on the
// level-0 chunk grid, when the plan reads the object (crossings); a
// coarse cell is a block of whole level-0 chunks, so the segment passes
// through it exactly when it passes through one of its chunks, and every
// level's cells follow from the same walk.

// chunkAt is level-0 chunk c's grid coordinates.
func (p *plan) chunkAt(c int32) []int64 { return p.keys[c][p.off : p.off+p.rank] }

// walkChunks calls visit with each level-0 chunk, by its coordinates,
// that the segment from a (a vertex of chunk ca) to b (of chunk cb)
// passes through strictly between ca and cb, in order from ca. Chunks
// are half-open, [k·cs, (k+1)·cs), as the store files vertices and the
// info's cells are. The ends' chunks are the store's (which filed the
// vertices), the way between them the geometry's: each step moves one or
// more axes one chunk towards cb, those whose next face the segment
// reaches first, so the walk ends at cb whatever rounding says and takes
// at most the chunks between ca and cb along the axes (Amanatides & Woo).
// A segment through an edge or corner of chunks steps the axes that enter
// the next chunk there together, then those that leave through a lower
// face (the point on it is in the chunk still), so no chunk it only
// grazes is visited.
func (p *plan) walkChunks(ca, cb []int64, a, b []float64, visit func(c []int64)) {
	cur := append([]int64(nil), ca...)
	ts := make([]float64, len(cur))
	for {
		tmin := math.Inf(1)
		done := true
		for i := range cur {
			if cur[i] == cb[i] {
				continue
			}
			done = false
			face := cur[i]
			if cb[i] > cur[i] {
				face++
			}
			t := (float64(face)*p.cs[i] - a[i]) / (b[i] - a[i])
			if math.IsNaN(t) {
				t = 0
			}
			ts[i] = t
			tmin = min(tmin, t)
		}
		if done {
			return
		}
		up := false
		for i := range cur {
			up = up || cur[i] < cb[i] && ts[i] == tmin
		}
		for i := range cur {
			if cur[i] != cb[i] && ts[i] == tmin && (cur[i] < cb[i]) == up {
				if up {
					cur[i]++
				} else {
					cur[i]--
				}
			}
		}
		if !slicesEqual(cur, cb) {
			visit(cur)
		}
	}
}

func slicesEqual(a, b []int64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// segmentCrossings appends to cross, for the segment seg from vertex va
// to vb of an object (vertices: its rows, chunks: each vertex's level-0
// chunk), a record (seg, then the chunk's coordinates) for each chunk it
// passes through between its ends' (see walkChunks).
func (p *plan) segmentCrossings(cross []int64, seg int64, vertices *zvf.Column, chunks []int32, va, vb int64) []int64 {
	ca, cb := p.chunkAt(chunks[va]), p.chunkAt(chunks[vb])
	if !farApart(ca, cb) {
		return cross
	}
	a, b := make([]float64, p.rank), make([]float64, p.rank)
	for i := range p.rank {
		a[i] = vertices.At(int(va)*p.rank + i).Float64()
		b[i] = vertices.At(int(vb)*p.rank + i).Float64()
	}
	p.walkChunks(ca, cb, a, b, func(c []int64) {
		cross = append(cross, seg)
		cross = append(cross, c...)
	})
	return cross
}

// farApart reports whether chunks ca and cb are neither the same nor
// face neighbours: only then may a segment between them pass through a
// third chunk (two face neighbours make a box, which holds the segment).
func farApart(ca, cb []int64) bool {
	var d int64
	for i := range ca {
		d += max(ca[i]-cb[i], cb[i]-ca[i])
	}
	return d > 1
}

// polylineFar reports whether two consecutive vertices of a polyline of
// these level-0 chunks are far apart (farApart): only then does the plan
// read the polyline's vertices to walk its segments.
func (p *plan) polylineFar(chunks []int32) bool {
	for v := 1; v < len(chunks); v++ {
		if chunks[v] != chunks[v-1] && farApart(p.chunkAt(chunks[v-1]), p.chunkAt(chunks[v])) {
			return true
		}
	}
	return false
}

// cellName is the name of the cell of level l holding level-0 chunk c
// (by its coordinates), as ofKey names them.
func (p *plan) cellName(l *spatialLevel, c []int64, b []byte) ([]byte, string) {
	b = b[:0]
	for i := range p.rank {
		if i > 0 {
			b = append(b, '_')
		}
		b = strconv.AppendInt(b, (c[i]-p.k0[i])/l.mult[i], 10)
	}
	return b, string(b)
}

// crossRecords is the stride of planObject.cross: a segment, then a
// chunk's coordinates.
func (p *plan) crossRecords(o *planObject) int { return len(o.cross) / (p.rank + 1) }

// segmentCells calls visit with each cell of level l that segment seg of
// object o passes through, once each: ka, the cell of its first vertex,
// the cells of the chunks between, kb, the cell of its last. (A walk
// moves each axis one way, so a cell's chunks come in one run.) Records
// of o.cross from *at on are read, those of seg consumed: segments are
// visited in order.
func (p *plan) segmentCells(l *spatialLevel, o *planObject, seg int64, ka, kb string, at *int, visit func(key string)) {
	visit(ka)
	last := ka
	var b []byte
	stride := p.rank + 1
	for ; *at < p.crossRecords(o) && o.cross[*at*stride] <= seg; *at++ {
		if o.cross[*at*stride] < seg {
			continue
		}
		var key string
		b, key = p.cellName(l, o.cross[*at*stride+1:(*at+1)*stride], b)
		if key != last {
			visit(key)
			last = key
		}
	}
	if kb != last {
		visit(kb)
	}
}

// crossesCell reports whether segment seg of object o passes through
// cell key of level l between its ends' cells.
func (p *plan) crossesCell(l *spatialLevel, o *planObject, seg int64, key string) bool {
	stride := p.rank + 1
	n := p.crossRecords(o)
	at := sort.Search(n, func(r int) bool { return o.cross[r*stride] >= seg })
	var b []byte
	for ; at < n && o.cross[at*stride] == seg; at++ {
		var name string
		if b, name = p.cellName(l, o.cross[at*stride+1:(at+1)*stride], b); name == key {
			return true
		}
	}
	return false
}

// polylineCells calls visit with each cell of level l that polyline o
// passes through: the cells of its vertices and of the chunks its
// segments pass through between them, a cell maybe more than once.
func (p *plan) polylineCells(l *spatialLevel, o *planObject, visit func(key string)) {
	for _, c := range o.chunks {
		visit(l.ofKey[c])
	}
	var b []byte
	stride := p.rank + 1
	for r := range p.crossRecords(o) {
		var key string
		b, key = p.cellName(l, o.cross[r*stride+1:(r+1)*stride], b)
		visit(key)
	}
}
