package zvf

import (
	"context"
	"encoding/binary"
	"errors"

	"github.com/zvfserve/zvfserve/zvf/ragged"
)

func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

type conn struct {
	edges, faces []int64
	faceWidth    int
}

// connect rebuilds connectivity among a set of rows. lookup maps (chunk,
// row) to the answer's row index; frags lists each chunk's fragments (rows
// in order) for the implicit-sequential skeleton rule.
//
// Graph: links/0 edges and cross-chunk edges with both ends present.
// Skeleton: explicit [child, parent] links win; otherwise a row's parent is
// the previous row of its fragment (no edge is invented across chunk seams
// or between trees, unlike the reference reader). Mesh: faces whose
// corners are all present.
func (l *Level) connect(ctx context.Context, keys []Key, lookup func(ks string, row int64) (int64, bool), frags map[string][][]int64) (conn, error) {
	var c conn
	geom := l.geometry()
	if geom != "graph" && geom != "skeleton" && geom != "mesh" {
		return c, nil
	}
	explicitChild := map[string]map[int64]bool{}
	mark := func(ks string, row int64) {
		m := explicitChild[ks]
		if m == nil {
			m = map[int64]bool{}
			explicitChild[ks] = m
		}
		m[row] = true
	}
	emit := func(idx []int64, width int) {
		if width == 2 {
			c.edges = append(c.edges, idx...)
		} else {
			c.faces = append(c.faces, idx...)
			c.faceWidth = width
		}
	}
	idx := make([]int64, 0, 8)
	if w := l.linkWidth; l.intra != "" {
		for _, key := range keys {
			ks := key.String()
			links, err := l.links0(ctx, key)
			if err != nil {
				return c, err
			}
			for r := 0; r+w <= len(links); r += w {
				rec := links[r : r+w]
				if geom == "skeleton" {
					mark(ks, rec[0])
				}
				idx = idx[:0]
				ok := true
				for _, v := range rec {
					i, found := lookup(ks, v)
					if !found {
						ok = false
						break
					}
					idx = append(idx, i)
				}
				if ok {
					emit(idx, w)
				}
			}
		}
	}
	ccl, err := l.lay.crossLinks(ctx, 0, keys)
	if err != nil {
		return c, err
	}
	for _, rec := range ccl {
		if geom == "skeleton" && len(rec) == 2 {
			mark(Key(rec[0].Chunk).String(), rec[0].Row)
		}
		idx = idx[:0]
		ok := true
		for _, ep := range rec {
			i, found := lookup(Key(ep.Chunk).String(), ep.Row)
			if !found {
				ok = false
				break
			}
			idx = append(idx, i)
		}
		if ok {
			emit(idx, len(rec))
		}
	}
	if geom == "skeleton" {
		for _, key := range keys { // in key order, not map order: equal requests give equal bytes
			ks := key.String()
			fl := frags[ks]
			ex := explicitChild[ks]
			for _, rows := range fl {
				for i := 1; i < len(rows); i++ {
					if ex[rows[i]] {
						continue
					}
					a, ok1 := lookup(ks, rows[i])
					b, ok2 := lookup(ks, rows[i-1])
					if ok1 && ok2 {
						c.edges = append(c.edges, a, b)
					}
				}
			}
		}
	}
	return c, nil
}

// links0 returns the rows of a chunk's links among its own rows
// (link_width int64 each, endpoints in the order written).
func (l *Level) links0(ctx context.Context, key Key) ([]int64, error) {
	ks := key.String()
	v, err := l.cached(ctx, l.cacheKey("links0", ks), func(ctx context.Context) (any, int64, error) {
		b, err := l.blob(ctx, l.intra, key)
		if errors.Is(err, ErrNotFound) {
			return []int64{}, 16, nil
		}
		if err != nil {
			return nil, 0, err
		}
		rows, sigma, err := ragged.DecodeLinkCell(b, true, l.linkWidth, l.intraPerm)
		if err != nil {
			return nil, 0, l.s.errf(ErrCorrupt, l.n, l.intra, ks, "%w", err)
		}
		cv, err := l.vertices(ctx, key)
		if err != nil {
			return nil, 0, err
		}
		for _, v := range rows {
			if v >= int64(cv.rows) {
				return nil, 0, l.s.errf(ErrCorrupt, l.n, l.intra, ks, "link endpoint %d outside the chunk's %d rows", v, cv.rows)
			}
		}
		out := ragged.InputOrder(rows, sigma, l.linkWidth)
		return out, int64(len(b)) + 24, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]int64), nil
}

// polylineEdges joins consecutive rows of every fragment of the emitted
// chunks, and a fragment's last row to the first row of the fragment that
// continues its streamline in another chunk, when both ends are in the
// answer. Edges come out in chunk, fragment, row order, so equal requests
// give equal bytes.
func (l *Level) polylineEdges(res *BBoxResult, emitted []*chunkMatch, answer [][]int32, pos map[string]int, inv *inverse) {
	for ci, m := range emitted {
		idx := answer[ci]
		fi := m.cv.frags
		nf := 1
		if fi != nil {
			nf = fi.Len()
		}
		var ci *chunkInverse
		if inv != nil {
			ci = inv.of(m.key)
		}
		e := 0 // ci's entry for fragment f, walked alongside
		for f := 0; f < nf; f++ {
			var prev int32 // answer index + 1 of the fragment's previous row
			step := func(r int64) {
				a := idx[r]
				if prev != 0 && a != 0 {
					res.Edges = append(res.Edges, int64(prev-1), int64(a-1))
				}
				prev = a
			}
			if fi == nil {
				for r := int64(0); r < int64(m.cv.rows); r++ {
					step(r)
				}
			} else if s, c, isRange := fi.Range(f); isRange {
				for r := s; r < s+c; r++ {
					step(r)
				}
			} else {
				for _, r := range fi.Indices(f) {
					step(r)
				}
			}
			if ci == nil || prev == 0 {
				continue // no continuation, or this fragment's last row is not in the answer
			}
			for e < len(ci.frags) && ci.frags[e] < int64(f) {
				e++
			}
			if e == len(ci.frags) || ci.frags[e] != int64(f) || ci.next[e].ks == "" {
				continue
			}
			nx := ci.next[e]
			j, ok := pos[nx.ks]
			if !ok {
				continue
			}
			r, ok := fragFirst(emitted[j].cv, int(nx.frag))
			if !ok || r >= int64(len(answer[j])) || answer[j][r] == 0 {
				continue
			}
			res.Edges = append(res.Edges, int64(prev-1), int64(answer[j][r]-1))
		}
	}
}

func (l *Level) bboxConnectivity(ctx context.Context, res *BBoxResult, emitted []*chunkMatch, answer [][]int32, inv *inverse) error {
	pos := make(map[string]int, len(emitted)) // chunk key -> index into emitted
	for i, m := range emitted {
		pos[m.key.String()] = i
	}
	lookup := func(ks string, row int64) (int64, bool) {
		i, ok := pos[ks]
		if !ok || row < 0 || row >= int64(len(answer[i])) || answer[i][row] == 0 {
			return 0, false
		}
		return int64(answer[i][row] - 1), true
	}
	// Empty, not absent: a client can tell "no edges here" from "this
	// geometry has none".
	if l.geometry() == "mesh" {
		res.Faces, res.FaceWidth = []int64{}, max(l.linkWidth, 3)
	} else {
		res.Edges = []int64{}
	}
	switch l.geometry() {
	case "polyline", "streamline", "line":
		res.Edges = make([]int64, 0, 2*res.Count) // about one edge a vertex
		l.polylineEdges(res, emitted, answer, pos, inv)
		return nil
	}
	frags := map[string][][]int64{}
	keys := make([]Key, 0, len(emitted))
	for _, m := range emitted {
		keys = append(keys, m.key)
		var fl [][]int64
		if m.cv.frags == nil {
			all := make([]int64, m.cv.rows)
			for i := range all {
				all[i] = int64(i)
			}
			fl = append(fl, all)
		} else {
			for f := 0; f < m.cv.frags.Len(); f++ {
				fl = append(fl, m.cv.frags.AppendRows(nil, f))
			}
		}
		frags[m.key.String()] = fl
	}
	c, err := l.connect(ctx, keys, lookup, frags)
	if err != nil {
		return err
	}
	if c.edges != nil {
		res.Edges = c.edges
	}
	if c.faces != nil {
		res.Faces, res.FaceWidth = c.faces, c.faceWidth
	}
	return nil
}
