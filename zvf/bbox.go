package zvf

import (
	"context"
	"slices"
)

// BBox streams the vertices inside the closed box, one Batch per chunk in
// key order, from q.Resume (or q.Offset) and up to q.Limit rows. The Batch
// and its slices are only valid during the emit call, and are not emit's
// to change (the next batch reuses what it shares). When rows remain,
// the result's Next says where the next page starts.
func (l *Level) BBox(ctx context.Context, q BBoxQuery, emit func(*Batch) error) (BBoxResult, error) {
	var res BBoxResult
	sel, rf, inv, err := l.bboxSetup(ctx, &q)
	if err != nil {
		return res, err
	}
	if err := l.checkHoles(ctx, q.Min, q.Max); err != nil {
		return res, err
	}
	wantConn := q.Connectivity && l.geometry() != "point_cloud"
	sc := l.s.getScratch()
	defer l.s.putScratch(sc)
	if t := l.tableFor(&q, rf, sel, inv); t != nil {
		if res, ok, err := l.tableBBox(ctx, t, sc, &q, emit); ok {
			return res, err
		}
	}
	sc.rf, sc.wire, sc.waiting = rf, q.Wire, q.Waiting
	if len(sc.abufs) < len(sel) {
		sc.abufs = append(sc.abufs, make([][]byte, len(sel)-len(sc.abufs))...)
	}
	sc.cand = l.candidates(sc.cand[:0], q.Min, q.Max)
	// The page starts at chunk p0, skipping skip matching rows: from a
	// Resume, the rank in its chunk; from an offset, every row before it
	// (matched again, their counts noted).
	p0, skip, from := 0, q.Offset, q.Offset
	var back []int64
	if r := q.Resume; r != nil {
		if r.chunk >= len(sc.cand) {
			return res, l.s.errf(ErrBadQuery, l.n, "", "", "cursor does not fit this answer")
		}
		p0, skip, from, back = r.chunk, int64(r.rank), r.Offset, r.back
	}
	sc.ai = answerIndex{l: l, sc: sc, min: q.Min, max: q.Max, cand: sc.cand, from: from, ps: -1, seenLo: p0, seen: sc.counts[:0]}
	ai := &sc.ai // in the scratch: a query without connectivity allocates nothing for it
	if wantConn {
		sc.byPos = slices.Grow(sc.byPos[:0], len(sc.cand))[:len(sc.cand)]
		clear(sc.byPos)
		ai.byPos = sc.byPos
		ai.page = sc.page[:0]
	}
	stopRank := 0 // with More: the rank in chunk pageEnd where the next page starts
	// Copying rows as they are found is for point answers: an answer
	// with connectivity keeps every page chunk's rows for ranking too,
	// and its memory is held to what the answer holds.
	sc.copy = !wantConn
	sc.bytesOnly = !wantConn && q.Wire && len(sel) == 0 && inv == nil
	if sc.bytesOnly && rf == nil {
		sc.dst = q.VertexDst
	}
	l.startBatches(sc)
	budget := wantConn && q.EdgeValueBytes > 0 && len(q.linkSel) > 0
	spent := int64(0) // the page's edge value bytes so far
	err = l.matches(ctx, sc, sc.cand[p0:], q.Min, q.Max, func(m *chunkMatch) (bool, error) {
		pos := p0 + len(ai.seen)
		res.Chunks++
		n := m.count()
		ai.seen = append(ai.seen, int64(n))
		if q.Resume != nil && skip > 0 && skip >= int64(n) {
			return true, l.s.errf(ErrBadQuery, l.n, "", "", "cursor does not fit this answer") // its chunk holds no row of that rank
		}
		if n == 0 {
			return false, nil
		}
		first := 0
		if skip > 0 {
			if skip >= int64(n) {
				skip -= int64(n)
				return false, nil
			}
			first = int(skip)
			skip = 0
		}
		last := n
		if q.Limit > 0 && res.Count+int64(last-first) > q.Limit {
			last = first + int(q.Limit-res.Count)
			res.More = true
		}
		if budget {
			cut, err := l.edgeBudget(ctx, sc, m, pos, first, last, &q, &spent, res.Count)
			if err != nil {
				return true, err
			}
			if cut < last {
				last, res.More = cut, true
			}
		}
		if last <= first {
			res.More, stopRank = true, first
			return true, nil
		}
		if ai.ps < 0 {
			ai.ps, ai.startPS = pos, from-int64(first)
		}
		if err := l.fillBatch(ctx, sc, m, first, last, from+res.Count, sel, inv); err != nil {
			return false, err
		}
		if wantConn {
			// m is reused by the next window: connectivity keeps the key,
			// the vertices and each row's rank.
			rc := sc.ranked(m, pos, from+res.Count-int64(first))
			ai.add(rc)
			ai.page = append(ai.page, rc)
		}
		res.Count += int64(last - first)
		if err := emit(&sc.batch); err != nil {
			return true, err
		}
		stopRank = last
		return res.More, nil
	})
	sc.counts, sc.copy, sc.bytesOnly, sc.dst, sc.waiting = ai.seen, false, false, nil, nil // later matching counts rows or finds connectivity, and emits nothing
	if wantConn {
		sc.page = ai.page // the grown list, for the next answer
	}
	if err != nil {
		return res, err
	}
	switch {
	case !res.More:
		res.Matched, res.MatchedKnown = from+res.Count, true
	case q.Resume == nil && q.Offset == 0 && len(sc.cand)-ai.pageEnd()-1 <= firstPageCountChunks:
		// The first page counts the whole answer when few chunks
		// follow it. The rule depends on the query alone (not on what is
		// cached), so equal requests answer equal bytes.
		end := ai.pageEnd()
		rest, err := l.countFrom(ctx, sc, end+1, &q)
		if err != nil {
			return res, err
		}
		res.Matched, res.MatchedKnown = res.Count+ai.seen[end-p0]-int64(stopRank)+rest, true
	}
	if res.More {
		res.Next = ai.nextResume(from+res.Count, p0, stopRank, back)
	}
	if wantConn {
		ai.to = from + res.Count
		ai.paged = from > 0 || res.More
		ai.setBefore(p0, back)
		if err := l.bboxConnectivity(ctx, &res, ai, inv, &q); err != nil {
			return res, err
		}
	}
	return res, nil
}

// bboxSetup checks q and finds what its answer reads: the attributes
// sel, the selection's row filter rf (nil: every row) and, on a level
// with objects, the inverse map inv that names each row's object. It
// sets q.linkSel.
func (l *Level) bboxSetup(ctx context.Context, q *BBoxQuery) (sel []*attrMeta, rf *rowFilter, inv *inverse, err error) {
	if err := l.checkQuery(q); err != nil {
		return nil, nil, nil, err
	}
	if sel, err = l.selectAttrs(q.Attributes); err != nil {
		return nil, nil, nil, err
	}
	if q.linkSel, err = l.selectLinkAttrs(q.LinkAttributes); err != nil {
		return nil, nil, nil, err
	}
	if rf, err = l.newRowFilter(ctx, q.Selection); err != nil {
		return nil, nil, nil, err
	}
	if l.objects != nil {
		if inv, err = l.inverseMap(ctx); err != nil {
			return nil, nil, nil, err
		}
	}
	return sel, rf, inv, nil
}

// checkQuery refuses a query no answer can come from: a bad box, a
// negative offset or limit, an offset its page position contradicts.
func (l *Level) checkQuery(q *BBoxQuery) error {
	if err := l.checkBox(q.Min, q.Max); err != nil {
		return err
	}
	if q.Offset < 0 || q.Limit < 0 {
		return l.s.errf(ErrBadQuery, l.n, "", "", "negative offset or limit")
	}
	if q.Resume != nil && q.Offset != 0 && q.Offset != q.Resume.Offset {
		return l.s.errf(ErrBadQuery, l.n, "", "", "an offset and a page position that disagree")
	}
	return nil
}

// startBatches readies sc.batch for fillBatch: what every batch of the
// level's answer shares.
func (l *Level) startBatches(sc *bboxScratch) {
	sc.batch = Batch{Vertices: Column{Name: "vertices", DType: l.vdt.Name, typ: l.vdt, Channels: l.s.dims}, Source: &sc.src}
	sc.src = ChunkRows{l: l, attrs: sc.src.attrs[:0]}
}

// fillBatch makes sc.batch the rows [first, last) of a matched chunk:
// vertices, object ids and the selected attributes, sliced from the
// cached chunk when the box covers it, else gathered into sc's buffers.
// offset is the answer's row number of its first row.
func (l *Level) fillBatch(ctx context.Context, sc *bboxScratch, m *chunkMatch, first, last int, offset int64, sel []*attrMeta, inv *inverse) error {
	// The batch's and its source's constant fields were set once for the
	// query (startBatches): an answer at a coarse level is many chunks of
	// few rows, and rebuilding both structs per chunk cost more than
	// their rows did.
	batch, src := &sc.batch, &sc.src
	src.key, src.cv, src.all, src.first, src.n, src.rows = m.key, m.cv, m.all, first, last-first, nil
	if !m.all && !m.noRows { // noRows: a binary answer, which reads no row number
		src.rows = m.rows[first:last]
	}
	if sc.bytesOnly {
		// Vertex bytes alone: no ids or columns to set (startBatches
		// left them empty), which an auto answer's many small chunks
		// would each pay for.
		batch.Chunk, batch.Rows, batch.First = m.key, last-first, offset
		rowBytes := l.vdt.Size * l.s.dims
		if v, ok := vertexSlice(m, first, last, rowBytes); ok {
			batch.Vertices.Data = v
		} else {
			batch.Vertices.Data = gatherVertices(sc, m, first, last, rowBytes)
		}
		return nil
	}
	batch.Chunk, batch.Rows, batch.First, batch.Attributes, batch.ObjectIDs, batch.WireIDs = m.key, last-first, offset, sc.cols[:0], nil, nil
	src.attrs = src.attrs[:0]
	sc.fr = nil
	batch.Vertices.Data = l.batchVertices(sc, m, first, last)
	if inv != nil {
		switch p := m.cv.prepared(m.key, inv); {
		case p != nil && sc.wire:
			batch.WireIDs = p.wireIDs(sc.wireIDs, m, first, last)
			if !m.all {
				sc.wireIDs = batch.WireIDs
			}
		case p != nil:
			if !m.all {
				sc.fr = fragRanks(sc, p.bounds, m.rows) // the ranked chunk keeps them for its edges
			}
			sc.ids = p.ownerIDs(sc.ids, m, sc.fr, first, last)
			batch.ObjectIDs = sc.ids
		default:
			sc.owner, sc.ids = l.rowOwners(sc.owner, sc.ids, m, inv, first, last)
			batch.ObjectIDs = sc.ids
		}
	}
	for k, a := range sel {
		data, ch, err := l.attribute(ctx, a, m.key, m.cv.rows)
		if err != nil {
			return err
		}
		w := ch * a.dt.Size
		col := Column{Name: a.Name, DType: a.dt.Name, typ: a.dt, Channels: ch, Categories: a.Categories, NullCode: a.nullCode}
		whole := col
		whole.Data = data
		sc.src.attrs = append(sc.src.attrs, whole)
		if m.all {
			col.Data = data[first*w : last*w]
		} else {
			sc.abufs[k] = gather(sc.abufs[k][:0], data, m.rows[first:last], w)
			col.Data = sc.abufs[k]
		}
		batch.Attributes = append(batch.Attributes, col)
	}
	sc.cols = batch.Attributes // keep the grown slice for the next chunk
	return nil
}

// batchVertices is the vertex bytes of rows [first, last) of match m:
// sliced from the cached chunk or the match's copy, else gathered into
// sc.vbuf. The slicing half inlines (vertexSlice): it runs for every
// chunk of an answer.
func (l *Level) batchVertices(sc *bboxScratch, m *chunkMatch, first, last int) []byte {
	rowBytes := l.vdt.Size * l.s.dims
	if v, ok := vertexSlice(m, first, last, rowBytes); ok {
		return v
	}
	return gatherVertices(sc, m, first, last, rowBytes)
}

// vertexSlice is the vertex bytes of rows [first, last) of match m when
// they lie one after another (in the cached chunk or the match's copy).
func vertexSlice(m *chunkMatch, first, last, rowBytes int) ([]byte, bool) {
	if m.all {
		return m.cv.data[first*rowBytes : last*rowBytes], true
	}
	if m.vdata != nil && m.vpos == nil {
		return m.vdata[first*rowBytes : last*rowBytes], true
	}
	return nil, false
}

// gatherVertices is the vertex bytes of rows [first, last) of match m
// gathered into sc.vbuf.
func gatherVertices(sc *bboxScratch, m *chunkMatch, first, last, rowBytes int) []byte {
	if m.vdata != nil {
		sc.vbuf = gather(sc.vbuf[:0], m.vdata, m.vpos[first:last], rowBytes)
	} else {
		sc.vbuf = gather(sc.vbuf[:0], m.cv.data, m.rows[first:last], rowBytes)
	}
	return sc.vbuf
}

// nextResume says where the page after this one starts: in the last chunk
// matched (ai.pageEnd), at rank stopRank, with the row counts of the
// chunks before it, the page's own then the cursor's (back).
func (ai *answerIndex) nextResume(offset int64, p0, stopRank int, back []int64) *Resume {
	end := ai.pageEnd()
	next := &Resume{Offset: offset, chunk: end, rank: stopRank, back: make([]int64, 0, end-p0+len(back))}
	for p := end - 1; p >= p0; p-- {
		next.back = append(next.back, ai.seen[p-p0])
	}
	next.back = append(next.back, back...)
	return next
}

// firstPageCountChunks is how many candidate chunks may follow a first
// page for it to count the whole answer (OGC numberMatched).
const firstPageCountChunks = 16

// gather appends the rows (w bytes each) of src named by rows.
func gather(dst, src []byte, rows []int32, w int) []byte {
	n := len(dst) + len(rows)*w
	if cap(dst) < n {
		dst = append(make([]byte, 0, n+n/4), dst...)
	}
	out := dst[len(dst):n]
	o := 0
	for j := 0; j < len(rows); {
		r := int(rows[j])
		k := j + 1
		for k < len(rows) && int(rows[k]) == r+k-j {
			k++
		}
		if k == j+1 && w == 12 { // a lone float32 × 3 row: copied inline
			*(*[12]byte)(out[o : o+12]) = [12]byte(src[12*r : 12*r+12])
			o += 12
		} else if k == j+1 && w == 8 { // a lone id (wire form): copied inline
			*(*[8]byte)(out[o : o+8]) = [8]byte(src[8*r : 8*r+8])
			o += 8
		} else { // a run of consecutive rows: one copy
			c := (k - j) * w
			copy(out[o:o+c], src[r*w:r*w+c])
			o += c
		}
		j = k
	}
	return dst[:n]
}

// rowOwners gives each emitted row the (first) object whose manifest names
// its fragment; -1 when none does. owner and ids are scratch, returned
// grown; ids[:last-first] is the answer. A selection that read the
// chunk's owners already left them in m.
func (l *Level) rowOwners(owner, ids []int64, m *chunkMatch, inv *inverse, first, last int) ([]int64, []int64) {
	of := m.owner
	if !m.owned {
		owner = l.chunkOwners(owner, m.key, m.cv, inv)
		of = owner
	}
	ids = slices.Grow(ids[:0], last-first)[:last-first]
	for i := first; i < last; i++ {
		ids[i-first] = of[m.row(i)]
	}
	return owner, ids
}

// countFrom counts the box's rows in the candidates from the i-th on: one
// more window of matching, nothing gathered.
func (l *Level) countFrom(ctx context.Context, sc *bboxScratch, i int, q *BBoxQuery) (int64, error) {
	rest := int64(0)
	err := l.matches(ctx, sc, sc.cand[i:], q.Min, q.Max, func(m *chunkMatch) (bool, error) {
		rest += int64(m.count())
		return false, nil
	})
	return rest, err
}
