package zvf

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"slices"

	"github.com/zvfserve/zvfserve/zvf/ragged"
)

func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

type conn struct {
	edges, faces []int64
	faceWidth    int
	// src, when the scope asked for refs, says where each edge is stored
	// (parallel to edges' pairs), to find its link attribute rows.
	src []linkRef
}

// connScope is what connect joins.
type connScope struct {
	// keys are the chunks whose own links and fragment runs are read.
	keys []Key
	// lookup maps (chunk, row) to the row's index in the answer; false
	// when the row is not in it (or not yet: past the page).
	lookup func(ks string, row int64) (int64, bool)
	// frags lists each chunk's fragments (rows in order) for the
	// implicit-sequential skeleton rule.
	frags map[string][][]int64
	// cross holds the cross-chunk records to consider when crossRead;
	// otherwise connect reads those stored in keys' cells.
	cross     [][]ragged.Endpoint
	crossRead bool
	// refs asks connect for each edge's linkRef; crossRefs are those of
	// cross (nil when the layout keeps none).
	refs      bool
	crossRefs []linkRef
	// from: only connections whose last vertex (largest index) is at
	// least from are kept — a page carries those whose last vertex it
	// holds.
	from int64
	// rows is the number of rows of a chunk the scope has read, -1 for
	// one it has not: a cross-chunk record naming a row past them is
	// corrupt, as an intra-chunk one is (links0), not an edge to leave out.
	rows func(ks string) int
}

// keep reports whether a connection with these answer indices is kept.
func (c *connScope) keep(idx ...int64) bool {
	return c.from == 0 || slices.Max(idx) >= c.from
}

// connect rebuilds connectivity among a set of rows.
//
// Graph: links/0 edges and cross-chunk edges with both ends present.
// Skeleton: explicit [child, parent] links win; otherwise a row's parent is
// the previous row of its fragment (no edge is invented across chunk seams
// or between trees, unlike the reference reader). Mesh: faces whose
// corners are all present.
func (l *Level) connect(ctx context.Context, sc connScope) (conn, error) {
	var c conn
	geom := l.geometry()
	if geom != "graph" && geom != "skeleton" && geom != "mesh" {
		return c, nil
	}
	lookup := sc.lookup
	explicitChild := map[string]map[int64]bool{}
	mark := func(ks string, row int64) {
		m := explicitChild[ks]
		if m == nil {
			m = map[int64]bool{}
			explicitChild[ks] = m
		}
		m[row] = true
	}
	emit := func(idx []int64, width int, ref linkRef) {
		if !sc.keep(idx...) {
			return
		}
		if width == 2 {
			c.edges = append(c.edges, idx...)
			if sc.refs {
				c.src = append(c.src, ref)
			}
		} else {
			c.faces = append(c.faces, idx...)
			c.faceWidth = width
		}
	}
	idx := make([]int64, 0, 8)
	if w := l.linkWidth; l.intra != "" {
		intraSeg := l.intraSegment()
		for _, key := range sc.keys {
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
					emit(idx, w, linkRef{seg: intraSeg, cell: key, row: r / w})
				}
			}
		}
	}
	ccl, crefs := sc.cross, sc.crossRefs
	if !sc.crossRead {
		var err error
		if sc.refs {
			ccl, crefs, err = l.lay.crossLinkRefs(ctx, 0, sc.keys)
		} else {
			ccl, err = l.lay.crossLinks(ctx, 0, sc.keys)
		}
		if err != nil {
			return c, err
		}
	}
	var ksBuf [8]string
	kss := ksBuf[:0] // a record's endpoint chunks
	for ri, rec := range ccl {
		kss = kss[:0]
		for _, ep := range rec {
			kss = append(kss, Key(ep.Chunk).String())
		}
		if geom == "skeleton" && len(rec) == 2 {
			mark(kss[0], rec[0].Row)
		}
		if err := l.checkCrossRecord(ctx, sc, rec, kss); err != nil {
			return c, err
		}
		idx = idx[:0]
		ok := true
		for j, ep := range rec {
			i, found := lookup(kss[j], ep.Row)
			if !found {
				ok = false
				break
			}
			idx = append(idx, i)
		}
		if ok {
			var ref linkRef // none: the layout keeps no attributes for it
			if crefs != nil {
				ref = crefs[ri]
			}
			emit(idx, len(rec), ref)
		}
	}
	if geom == "skeleton" {
		for _, key := range sc.keys { // in key order, not map order: equal requests give equal bytes
			ks := key.String()
			fl := sc.frags[ks]
			ex := explicitChild[ks]
			for _, rows := range fl {
				for i := 1; i < len(rows); i++ {
					if ex[rows[i]] {
						continue
					}
					a, ok1 := lookup(ks, rows[i])
					b, ok2 := lookup(ks, rows[i-1])
					if ok1 && ok2 && sc.keep(a, b) {
						c.edges = append(c.edges, a, b)
						if sc.refs {
							c.src = append(c.src, linkRef{}) // implied: no stored link, no attributes
						}
					}
				}
			}
		}
	}
	return c, nil
}

// checkCrossRecord refuses a cross-chunk record the answer reads (one
// with an endpoint in a chunk the scope has read) that names a vertex
// that is not there: a row past its chunk's rows, or any row of a chunk
// the level does not have (an unwritten cell holds no rows, zvf-0.9-format
// §3.2). Either is corrupt data, as in an intra-chunk record (links0),
// not an edge to leave out without a word.
// kss are the endpoints' chunks as strings.
func (l *Level) checkCrossRecord(ctx context.Context, sc connScope, rec []ragged.Endpoint, kss []string) error {
	read := false
	for _, ks := range kss {
		read = read || sc.rows(ks) >= 0
	}
	if !read {
		return nil // outside the answer, whatever it names
	}
	for j, ep := range rec {
		ks := kss[j]
		switch n := sc.rows(ks); {
		case n >= 0 && ep.Row >= int64(n):
			return l.s.errf(ErrCorrupt, l.n, l.crossFamily(0), ks, "a cross-chunk link record names row %d of chunk %s, which holds %d rows", ep.Row, ks, n)
		case n < 0 && !l.hasKey(Key(ep.Chunk)):
			return l.unlisted(ctx, Key(ep.Chunk), "a cross-chunk link",
				l.s.errf(ErrCorrupt, l.n, l.crossFamily(0), ks, "a cross-chunk link record names row %d of chunk %s, which the level does not have (no vertices there)", ep.Row, ks))
		}
	}
	return nil
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

// polylineEdges joins consecutive rows of every fragment of the page's
// chunks, and a fragment's last row to the first row of the fragment that
// continues its streamline in another chunk, when both ends are in the
// answer and the later one is in the page. Edges come out in chunk,
// fragment, row order (then, on a later page, the continuations that
// reach back to an earlier one), so equal requests give equal bytes.
func (l *Level) polylineEdges(ctx context.Context, o *lineOut, ai *answerIndex, inv *inverse) error {
	if ai.paged && inv != nil {
		// The chunks before the page that its continuations reach.
		var need []string
		for _, c := range ai.page {
			ci := inv.ofChunk(ai, c)
			if ci == nil {
				continue
			}
			for e := range ci.frags {
				if nx := ci.next[e]; nx.ks != "" && ai.chunk(nx.ks) == nil {
					need = append(need, nx.ks)
				}
				for _, pv := range ci.prevs(e) {
					if ai.chunk(pv.ks) == nil {
						need = append(need, pv.ks)
					}
				}
			}
		}
		slices.Sort(need)
		if err := ai.resolve(ctx, slices.Compact(need), nil); err != nil {
			return err
		}
	}
	from, to := ai.from, ai.to
	if inv != nil {
		ai.sc.next.index(ai)
		defer ai.sc.next.unindex(ai)
	}
	for _, c := range ai.page {
		p := c.prep // what ranked found; else built now, or none
		if p == nil {
			p = c.cv.prepared(c.key, inv)
		}
		if p != nil {
			p.lineEdges(o, ai, c)
			continue
		}
		var ci *chunkInverse
		if inv != nil {
			ci = inv.ofChunk(ai, c)
		}
		c.dense()
		fi := c.cv.frags
		nf := 1
		if fi != nil {
			nf = fi.Len()
		}
		e := 0 // ci's entry for fragment f, walked alongside
		for f := 0; f < nf; f++ {
			prev := int64(-1) // answer index of the fragment's previous row; -1: not in the answer
			step := func(r int64) {
				a := c.at(r)
				if prev >= 0 && a >= 0 && max(prev, a) >= from && max(prev, a) < to {
					o.add(prev, a)
				}
				prev = a
			}
			if fi == nil {
				for r := int64(0); r < int64(c.cv.rows); r++ {
					step(r)
				}
			} else if s, n, isRange := fi.Range(f); isRange {
				for r := s; r < s+n; r++ {
					step(r)
				}
			} else {
				for _, r := range fi.Indices(f) {
					step(r)
				}
			}
			// A continuation whose first end is before the page is the
			// later one's to carry (below).
			if ci == nil || prev < from || prev >= to {
				continue
			}
			for e < len(ci.frags) && ci.frags[e] < int64(f) {
				e++
			}
			if e == len(ci.frags) || ci.frags[e] != int64(f) || ci.next[e].ks == "" {
				continue
			}
			nx := ci.next[e]
			d := ai.chunk(nx.ks)
			if d == nil {
				continue
			}
			r, ok := fragFirst(d.cv, int(nx.frag))
			if !ok {
				continue
			}
			if b := d.at(r); b >= 0 && b < to {
				o.add(prev, b)
			}
		}
	}
	if !ai.paged || inv == nil {
		return nil
	}
	// Continuations from a fragment that ended on an earlier page into
	// one of this page's.
	for _, c := range ai.page {
		ci := inv.ofChunk(ai, c)
		if ci == nil {
			continue
		}
		for e, f := range ci.frags {
			pvs := ci.prevs(e)
			if len(pvs) == 0 {
				continue
			}
			r, ok := fragFirst(c.cv, int(f))
			if !ok {
				continue
			}
			b := c.at(r)
			if b < from || b >= to {
				continue
			}
			for _, pv := range pvs {
				d := ai.chunk(pv.ks)
				if d == nil {
					continue
				}
				if r, ok := fragLast(d.cv, int(pv.frag)); ok {
					if a := d.at(r); a >= 0 && a < from {
						o.add(a, b)
					}
				}
			}
		}
	}
	return nil
}

// lines reports whether the level's rows are streamlines' or polylines'
// vertices, joined along each fragment.
func (l *Level) lines() bool {
	switch l.geometry() {
	case "polyline", "streamline", "line":
		return true
	}
	return false
}

// q's EdgeBuf, Wire and WireBuf say where a line answer's edges go (see
// BBoxQuery).
func (l *Level) bboxConnectivity(ctx context.Context, res *BBoxResult, ai *answerIndex, inv *inverse, q *BBoxQuery) error {
	// Empty, not absent: a client can tell "no edges here" from "this
	// geometry has none".
	if l.geometry() == "mesh" {
		res.Faces, res.FaceWidth = []int64{}, max(l.linkWidth, 3)
	} else {
		res.Edges = []int64{}
	}
	switch l.geometry() {
	case "polyline", "streamline", "line":
		// Every index is below ai.to: the wire's uint32 holds them all
		// when it is at most 2^32.
		o := lineOut{wire: q.Wire && ai.to <= math.MaxUint32+1}
		if o.wire {
			o.w = slices.Grow(q.WireBuf[:0], int(8*res.Count)) // about one edge a vertex
		} else if o.e = slices.Grow(q.EdgeBuf[:0], int(2*res.Count)); o.e == nil {
			o.e = res.Edges
		}
		err := l.polylineEdges(ctx, &o, ai, inv)
		if o.wire {
			res.Edges, res.WireEdges = nil, o.w
			if o.w == nil {
				res.WireEdges = []byte{}
			}
		} else {
			res.Edges = o.e
		}
		return err
	}
	to := ai.to
	lookup := func(ks string, row int64) (int64, bool) {
		c := ai.chunk(ks)
		if c == nil {
			return 0, false
		}
		c.dense() // connect looks up every link of the chunk
		i := c.at(row)
		return i, i >= 0 && i < to
	}
	frags := map[string][][]int64{}
	keys := make([]Key, 0, len(ai.page))
	for _, c := range ai.page {
		keys = append(keys, c.key)
		var fl [][]int64
		if c.cv.frags == nil {
			all := make([]int64, c.cv.rows)
			for i := range all {
				all[i] = int64(i)
			}
			fl = append(fl, all)
		} else {
			for f := 0; f < c.cv.frags.Len(); f++ {
				fl = append(fl, c.cv.frags.AppendRows(nil, f))
			}
		}
		frags[c.key.String()] = fl
	}
	rows := func(ks string) int {
		if c := ai.chunk(ks); c != nil {
			return c.cv.rows
		}
		return -1
	}
	scope := connScope{keys: keys, lookup: lookup, frags: frags, from: ai.from, rows: rows, refs: len(q.linkSel) > 0}
	if ai.paged {
		if err := l.pageCross(ctx, ai, &scope); err != nil {
			return err
		}
	}
	c, err := l.connect(ctx, scope)
	if err != nil {
		return err
	}
	if c.edges != nil {
		res.Edges = c.edges
	}
	if c.faces != nil {
		res.Faces, res.FaceWidth = c.faces, c.faceWidth
	}
	if scope.refs {
		if res.EdgeAttributes, err = l.edgeColumns(ctx, q.linkSel, c.src); err != nil {
			return err
		}
	}
	return nil
}

// pageCross reads the cross-chunk records a page of a paged answer
// considers — those the whole answer reads that touch the page's chunks —
// and resolves the earlier chunks they reach. The whole answer reads the
// records stored in the cells of its chunks (ZVF 0.9), or all of them
// (0.7's one list); a record's first stored endpoint is in its cell, so a
// page needs the cells of its own chunks and of the chunks from which an
// offset leads into them, when those hold rows of the answer.
func (l *Level) pageCross(ctx context.Context, ai *answerIndex, scope *connScope) error {
	var buf [96]byte
	inPage := func(k []int64) bool {
		i, ok := ai.l.keySet[string(Key(k).appendTo(buf[:0]))]
		if !ok {
			return false
		}
		c := ai.chunkAt(int32(i))
		return c != nil && c.pos >= ai.ps
	}
	var recs [][]ragged.Endpoint
	var refs []linkRef
	sources := l.lay.crossSources(0, scope.keys)
	if sources == nil {
		all, allRefs, err := l.lay.crossLinkRefs(ctx, 0, nil)
		if err != nil {
			return err
		}
		for i, rec := range all {
			for _, ep := range rec {
				if inPage(ep.Chunk) {
					recs = append(recs, rec)
					if allRefs != nil {
						refs = append(refs, allRefs[i])
					}
					break
				}
			}
		}
	} else {
		// Sources before the page need their ranks (a record's first
		// endpoint is there); after it, only whether they hold rows: of
		// those records only a skeleton's explicit parents matter here.
		var earlier, later []string
		for _, k := range sources {
			ks := k.String()
			switch p := ai.position(ks); {
			case p < 0:
			case p < ai.ps:
				earlier = append(earlier, ks)
			case p > ai.pageEnd() && l.geometry() == "skeleton":
				later = append(later, ks)
			}
		}
		if err := ai.resolve(ctx, earlier, later); err != nil {
			return err
		}
		kept := sources[:0:0]
		for _, k := range sources {
			if p := ai.position(k.String()); p >= 0 && ai.emittedInAnswer(p) {
				kept = append(kept, k)
			}
		}
		var err error
		if scope.refs {
			recs, refs, err = l.lay.crossLinkRefs(ctx, 0, kept)
		} else {
			recs, err = l.lay.crossLinks(ctx, 0, kept)
		}
		if err != nil {
			return err
		}
	}
	var need []string
	for _, rec := range recs {
		for _, ep := range rec {
			if ks := Key(ep.Chunk).String(); ai.chunk(ks) == nil {
				need = append(need, ks)
			}
		}
	}
	slices.Sort(need)
	if err := ai.resolve(ctx, slices.Compact(need), nil); err != nil {
		return err
	}
	scope.cross, scope.crossRead = recs, true
	if scope.refs {
		scope.crossRefs = refs
	}
	return nil
}
