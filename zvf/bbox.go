package zvf

import (
	"context"
	"encoding/binary"
	"math"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/zvfserve/zvfserve/zvf/zarr"
)

// chunkMatch is one chunk's rows inside a box.
type chunkMatch struct {
	key  Key
	cv   *chunkVerts
	all  bool    // every row matches
	rows []int32 // matching rows, ascending (when !all)
}

func (m *chunkMatch) count() int {
	if m.all {
		return m.cv.rows
	}
	return len(m.rows)
}

func (m *chunkMatch) row(i int) int {
	if m.all {
		return i
	}
	return int(m.rows[i])
}

func (l *Level) checkBox(min, max []float64) error {
	d := l.s.dims
	if len(min) != d || len(max) != d {
		return l.s.errf(ErrBadQuery, l.n, "", "", "box needs %d numbers per corner, got %d and %d", d, len(min), len(max))
	}
	for i := range min {
		if math.IsNaN(min[i]) || math.IsNaN(max[i]) {
			return l.s.errf(ErrBadQuery, l.n, "", "", "box corner is NaN")
		}
		if min[i] > max[i] {
			return l.s.errf(ErrBadQuery, l.n, "", "", "box min %v exceeds max %v on axis %d", min[i], max[i], i)
		}
	}
	return nil
}

// candidates appends the indices (into l.keys) of the level's chunks that
// intersect the box, in key order: per axis floor(lo/cs) … floor(hi/cs),
// inclusive, no origin offset.
func (l *Level) candidates(out []int32, min, max []float64) []int32 {
	d := l.s.dims
	var lo, hi [maxDims]float64
	for i := 0; i < d; i++ {
		lo[i] = math.Floor(min[i] / l.chunkShape[i])
		hi[i] = math.Floor(max[i] / l.chunkShape[i])
	}
	off := l.keyArity - d
	for j, k := range l.keys {
		in := true
		for i := 0; i < d; i++ {
			c := float64(k[off+i])
			if c < lo[i] || c > hi[i] {
				in = false
				break
			}
		}
		if in {
			out = append(out, int32(j))
		}
	}
	return out
}

// maxDims bounds a store's axes (readRoot refuses more).
const maxDims = 16

// bboxScratch is one query's reusable memory: the candidate list, a
// window of matches with their row lists, and the gather buffers. Pooled
// per store, so a warm query allocates nothing per chunk or per vertex.
type bboxScratch struct {
	cand  []int32
	res   []*chunkMatch
	ms    []chunkMatch
	vbuf  []byte
	abufs [][]byte
	owner []int64 // row owners of the current chunk
	ids   []int64 // the batch's object ids
	cols  []Column
	batch Batch
}

func (s *Store) getScratch() *bboxScratch {
	if sc, ok := s.scratch.Get().(*bboxScratch); ok {
		return sc
	}
	return &bboxScratch{}
}

// putScratch returns sc to the pool unless it grew past what is worth
// keeping (a 1M-vertex answer's buffers stay with the GC).
func (s *Store) putScratch(sc *bboxScratch) {
	if cap(sc.vbuf) > 16<<20 {
		sc.vbuf = nil
	}
	if cap(sc.owner) > 1<<20 || cap(sc.ids) > 1<<20 {
		sc.owner, sc.ids = nil, nil
	}
	for i := range sc.abufs {
		if cap(sc.abufs[i]) > 16<<20 {
			sc.abufs[i] = nil
		}
	}
	for i := range sc.ms {
		if cap(sc.ms[i].rows) > 1<<18 {
			sc.ms[i].rows = nil
		}
		sc.ms[i].cv = nil
	}
	clear(sc.res)
	sc.batch = Batch{}
	clear(sc.cols)
	s.scratch.Put(sc)
}

// match finds the rows of chunk l.keys[i] inside [min, max], into m
// (whose rows slice is reused).
func (l *Level) match(ctx context.Context, i int32, min, max []float64, m *chunkMatch) error {
	cv, err := l.verticesAt(ctx, i)
	if err != nil {
		return err
	}
	l.matchVerts(l.keys[i], cv, min, max, m)
	return nil
}

func (l *Level) matchVerts(key Key, cv *chunkVerts, min, max []float64, m *chunkMatch) {
	rows := m.rows[:0]
	*m = chunkMatch{key: key, cv: cv}
	d := l.s.dims
	off := l.keyArity - d
	inside := true
	for i := 0; i < d; i++ {
		c0 := float64(key[off+i]) * l.chunkShape[i]
		c1 := c0 + l.chunkShape[i]
		// The chunk spans [c0, c1); it is wholly inside only if the box
		// covers it with room (c1 itself belongs to the next chunk, but a
		// row there would be misfiled, so the exact test still guards).
		if !(min[i] <= c0 && c1 <= max[i]) {
			inside = false
		}
	}
	if inside && (cv.inCell || l.rowsWithin(cv, min, max, 0, cv.rows)) {
		m.all, m.rows = true, rows
		return
	}
	if l.binsUsable(cv) {
		m.rows = l.matchBins(rows, cv, key, min, max)
		return
	}
	m.rows = appendMatches(rows, cv.data, l.vdt, d, 0, cv.rows, min, max)
}

// rowsWithin confirms rows [a, b) are all inside, stopping at the first
// that is not: the per-vertex test stays exact even for a chunk the box
// covers (a corrupt store may file rows in the wrong chunk).
func (l *Level) rowsWithin(cv *chunkVerts, min, max []float64, a, b int) bool {
	d := l.s.dims
	if l.vdt.Name == "float32" && d == 3 {
		x0, y0, z0, x1, y1, z1 := min[0], min[1], min[2], max[0], max[1], max[2]
		data := cv.data
		for r := a; r < b; r++ {
			p := data[12*r : 12*r+12 : 12*r+12]
			x := float64(math.Float32frombits(binary.LittleEndian.Uint32(p)))
			y := float64(math.Float32frombits(binary.LittleEndian.Uint32(p[4:])))
			z := float64(math.Float32frombits(binary.LittleEndian.Uint32(p[8:])))
			if !(x >= x0 && x <= x1 && y >= y0 && y <= y1 && z >= z0 && z <= z1) {
				return false
			}
		}
		return true
	}
	for r := a; r < b; r++ {
		for i := 0; i < d; i++ {
			v := l.vdt.At(cv.data, r*d+i).Float64()
			if !(v >= min[i] && v <= max[i]) {
				return false
			}
		}
	}
	return true
}

func prod(v []int64) int64 {
	p := int64(1)
	for _, x := range v {
		p *= x
	}
	return p
}

// matchBins uses fragment = bin: fragments whose bin box misses the query
// are skipped without touching their rows.
func (l *Level) matchBins(out []int32, cv *chunkVerts, key Key, min, max []float64) []int32 {
	d := l.s.dims
	// Per axis, the run of bins the box overlaps and which of those it
	// covers, with the same arithmetic as binBox; then only the bins in
	// that sub-grid are visited.
	var first, last, idx [maxDims]int64
	var covers [maxDims][64]bool
	for i := 0; i < d; i++ {
		first[i], last[i] = -1, -2
		n := l.bpc[i]
		for b := int64(0); b < n; b++ {
			b0 := float64(key[i]*n+b) * l.binShape[i]
			b1 := b0 + l.binShape[i]
			if b1 < min[i] || b0 > max[i] {
				continue
			}
			if first[i] < 0 {
				first[i] = b
			}
			last[i] = b
			if b < 64 {
				covers[i][b] = min[i] <= b0 && b1 <= max[i]
			}
		}
		if first[i] < 0 {
			return out
		}
		idx[i] = first[i]
	}
	for {
		f, inside := int64(0), true
		for i := 0; i < d; i++ {
			f = f*l.bpc[i] + idx[i]
			inside = inside && idx[i] < 64 && covers[i][idx[i]]
		}
		if start, count, _ := cv.frags.Range(int(f)); count > 0 {
			// A covered bin takes all its rows when they were found in
			// their bin's cell at decode time (otherwise they are tested).
			if inside && (cv.binInside(int(f)) || l.rowsWithin(cv, min, max, int(start), int(start+count))) {
				out = appendRun(out, int32(start), int(count))
			} else {
				out = appendMatches(out, cv.data, l.vdt, d, int(start), int(start+count), min, max)
			}
		}
		// Next bin of the sub-grid, last axis fastest.
		i := d - 1
		for ; i >= 0; i-- {
			if idx[i] < last[i] {
				idx[i]++
				break
			}
			idx[i] = first[i]
		}
		if i < 0 {
			return out
		}
	}
}

// appendRun appends the row numbers start … start+n-1.
func appendRun(out []int32, start int32, n int) []int32 {
	k := len(out)
	out = slices.Grow(out, n)[:k+n]
	run := out[k:]
	for j := range run {
		run[j] = start + int32(j)
	}
	return out
}

// binInside reports whether bin f's rows were all found in its cell.
func (cv *chunkVerts) binInside(f int) bool {
	return f>>6 < len(cv.binIn) && cv.binIn[f>>6]&(1<<(f&63)) != 0
}

// binsUsable reports whether cv's fragments are its bins (fragment = bin,
// all ranges), so the bin prefilter applies.
func (l *Level) binsUsable(cv *chunkVerts) bool {
	return l.binPrefilter && cv.frags != nil && int64(cv.frags.Len()) == prod(l.bpc) && cv.frags.NumRanges() == cv.frags.Len()
}

// binBox writes the closed cell box of bin f of chunk key (row-major: the
// last axis fastest).
func (l *Level) binBox(key Key, f int, lo, hi []float64) {
	r := int64(f)
	for i := len(lo) - 1; i >= 0; i-- {
		local := r % l.bpc[i]
		r /= l.bpc[i]
		lo[i] = float64(key[i]*l.bpc[i]+local) * l.binShape[i]
		hi[i] = lo[i] + l.binShape[i]
	}
}

// markContainment records which of a freshly decoded chunk's rows lie in
// their cells (see chunkVerts).
func (l *Level) markContainment(key Key, cv *chunkVerts) {
	d := l.s.dims
	off := l.keyArity - d
	var lo, hi [maxDims]float64
	for i := 0; i < d; i++ {
		lo[i] = float64(key[off+i]) * l.chunkShape[i]
		hi[i] = lo[i] + l.chunkShape[i]
	}
	cv.inCell = l.rowsWithin(cv, lo[:d], hi[:d], 0, cv.rows)
	if !l.binsUsable(cv) {
		return
	}
	n := cv.frags.Len()
	cv.binIn = make([]uint64, (n+63)/64)
	for f := 0; f < n; f++ {
		start, count, _ := cv.frags.Range(f)
		l.binBox(key, f, lo[:d], hi[:d])
		if l.rowsWithin(cv, lo[:d], hi[:d], int(start), int(start+count)) {
			cv.binIn[f>>6] |= 1 << (f & 63)
		}
	}
}

// appendMatches appends the rows in [a, b) inside the closed box. float32
// and float64 rows are tested in place with no per-row calls.
func appendMatches(out []int32, data []byte, dt zarr.DataType, d, a, b int, min, max []float64) []int32 {
	switch {
	case dt.Name == "float32" && d == 3:
		// Rows near the box's faces match at random, so the test is
		// branch-free: every row is written and the length advances only
		// for a match.
		x0, y0, z0, x1, y1, z1 := min[0], min[1], min[2], max[0], max[1], max[2]
		n := len(out)
		out = slices.Grow(out, b-a)[:n+b-a]
		for r := a; r < b; r++ {
			p := data[12*r : 12*r+12 : 12*r+12]
			x := float64(math.Float32frombits(binary.LittleEndian.Uint32(p)))
			y := float64(math.Float32frombits(binary.LittleEndian.Uint32(p[4:])))
			z := float64(math.Float32frombits(binary.LittleEndian.Uint32(p[8:])))
			out[n] = int32(r)
			n += b2i(x >= x0) & b2i(x <= x1) & b2i(y >= y0) & b2i(y <= y1) & b2i(z >= z0) & b2i(z <= z1)
		}
		out = out[:n]
	case dt.Name == "float32":
		for r := a; r < b; r++ {
			ok := true
			for i := 0; i < d; i++ {
				v := float64(math.Float32frombits(binary.LittleEndian.Uint32(data[4*(r*d+i):])))
				if !(v >= min[i] && v <= max[i]) {
					ok = false
					break
				}
			}
			if ok {
				out = append(out, int32(r))
			}
		}
	case dt.Name == "float64":
		for r := a; r < b; r++ {
			ok := true
			for i := 0; i < d; i++ {
				v := math.Float64frombits(binary.LittleEndian.Uint64(data[8*(r*d+i):]))
				if !(v >= min[i] && v <= max[i]) {
					ok = false
					break
				}
			}
			if ok {
				out = append(out, int32(r))
			}
		}
	default:
		for r := a; r < b; r++ {
			ok := true
			for i := 0; i < d; i++ {
				v := dt.At(data, r*d+i).Float64()
				if !(v >= min[i] && v <= max[i]) {
					ok = false
					break
				}
			}
			if ok {
				out = append(out, int32(r))
			}
		}
	}
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// matches runs match over the candidate chunks, calling fn in key order.
// Chunks already in the cache are matched in place; the others are read
// concurrently (bounded). Only a window of chunks is held at once; the
// *chunkMatch handed to fn is reused after fn returns.
func (l *Level) matches(ctx context.Context, sc *bboxScratch, cand []int32, min, max []float64, fn func(*chunkMatch) (stop bool, err error)) error {
	win := 2 * l.s.conc
	if len(sc.ms) < win {
		sc.ms = make([]chunkMatch, win)
		sc.res = make([]*chunkMatch, win)
	}
	for start := 0; start < len(cand); start += win {
		if err := ctx.Err(); err != nil {
			return err // a long answer from the cache still stops when its request does
		}
		end := start + win
		if end > len(cand) {
			end = len(cand)
		}
		res := sc.res[:end-start]
		missing := 0
		for j, i := range cand[start:end] {
			res[j] = nil
			if v, ok := l.s.peek(l.vkeys[i]); ok {
				l.matchVerts(l.keys[i], v.(*chunkVerts), min, max, &sc.ms[j])
				res[j] = &sc.ms[j]
			} else {
				missing++
			}
		}
		if missing > 0 {
			g, gctx := errgroup.WithContext(ctx)
			g.SetLimit(l.s.conc)
			for j, i := range cand[start:end] {
				if res[j] != nil {
					continue
				}
				m := &sc.ms[j]
				g.Go(func() (err error) {
					defer l.s.recoverInto(&err, "bbox chunk")
					return l.match(gctx, i, min, max, m)
				})
			}
			if err := g.Wait(); err != nil {
				return err
			}
			for j := range res {
				res[j] = &sc.ms[j]
			}
		}
		for _, m := range res {
			stop, err := fn(m)
			if err != nil || stop {
				return err
			}
		}
	}
	return nil
}

// CountInBox counts the level's vertices inside the closed box.
func (l *Level) CountInBox(ctx context.Context, min, max []float64) (int64, error) {
	if err := l.checkBox(min, max); err != nil {
		return 0, err
	}
	var n int64
	sc := l.s.getScratch()
	defer l.s.putScratch(sc)
	sc.cand = l.candidates(sc.cand[:0], min, max)
	err := l.matches(ctx, sc, sc.cand, min, max, func(m *chunkMatch) (bool, error) {
		n += int64(m.count())
		return false, nil
	})
	return n, err
}

// ChooseLevel returns the finest level whose vertex count inside the box
// is at most budget, or the coarsest level when none fits, among the levels
// that hold every attribute named in attrs ("*" or none: any level). A
// level whose count, estimated from its density over the store bounds, is
// far above the budget is skipped without reading it; near the budget the
// count is exact.
func (s *Store) ChooseLevel(ctx context.Context, min, max []float64, budget int64, attrs []string) (int, error) {
	frac := s.boxFraction(min, max)
	levels := make([]*Level, 0, len(s.levels))
	for _, l := range s.levels {
		if err := l.checkBox(min, max); err != nil {
			return 0, err
		}
		if _, err := l.selectAttrs(attrs); err == nil {
			levels = append(levels, l)
		}
	}
	if len(levels) == 0 {
		return 0, s.errf(ErrNotFound, -1, "", "", "no level holds every attribute of %q", strings.Join(attrs, ","))
	}
	for i, l := range levels {
		est := frac * float64(l.meta.VertexCount)
		if i < len(levels)-1 && frac > 0 && est > 4*float64(budget) {
			continue
		}
		n, err := l.CountInBox(ctx, min, max)
		if err != nil {
			return 0, err
		}
		if n <= budget {
			return l.n, nil
		}
	}
	return levels[len(levels)-1].n, nil
}

// boxFraction is the share of the store's bounds the box covers (0 when
// the bounds are unknown or degenerate).
func (s *Store) boxFraction(min, max []float64) float64 {
	b := s.info.Bounds
	if len(b[0]) != len(min) || len(b[1]) != len(max) {
		return 0
	}
	f := 1.0
	for i := range min {
		span := b[1][i] - b[0][i]
		if !(span > 0) {
			return 0
		}
		lo, hi := math.Max(min[i], b[0][i]), math.Min(max[i], b[1][i])
		if hi < lo {
			return 0
		}
		f *= (hi - lo) / span
	}
	return f
}

// BBox streams the vertices inside the closed box, one Batch per chunk in
// key order, honouring q.Offset and q.Limit. The Batch and its slices are
// only valid during the emit call.
func (l *Level) BBox(ctx context.Context, q BBoxQuery, emit func(*Batch) error) (BBoxResult, error) {
	var res BBoxResult
	if err := l.checkBox(q.Min, q.Max); err != nil {
		return res, err
	}
	if q.Offset < 0 || q.Limit < 0 {
		return res, l.s.errf(ErrBadQuery, l.n, "", "", "negative offset or limit")
	}
	sel, err := l.selectAttrs(q.Attributes)
	if err != nil {
		return res, err
	}
	var inv *inverse
	if l.objects != nil {
		if inv, err = l.inverseMap(ctx); err != nil {
			return res, err
		}
	}
	wantConn := q.Connectivity && l.geometry() != "point_cloud"
	// For connectivity: the emitted chunks and, per chunk, each row's
	// answer index + 1 (0: not in the answer).
	var emitted []*chunkMatch
	var answer [][]int32
	skip := q.Offset
	rowBytes := l.vdt.Size * l.s.dims
	sc := l.s.getScratch()
	defer l.s.putScratch(sc)
	if len(sc.abufs) < len(sel) {
		sc.abufs = append(sc.abufs, make([][]byte, len(sel)-len(sc.abufs))...)
	}
	batch := &sc.batch
	sc.cand = l.candidates(sc.cand[:0], q.Min, q.Max)
	err = l.matches(ctx, sc, sc.cand, q.Min, q.Max, func(m *chunkMatch) (bool, error) {
		res.Chunks++
		n := m.count()
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
		if last <= first {
			res.More = true
			return true, nil
		}
		*batch = Batch{Chunk: m.key, Rows: last - first, First: res.Count, Attributes: sc.cols[:0]}
		batch.Vertices = Column{Name: "vertices", DType: l.vdt.Name, typ: l.vdt, Channels: l.s.dims}
		if m.all {
			batch.Vertices.Data = m.cv.data[first*rowBytes : last*rowBytes]
		} else {
			sc.vbuf = gather(sc.vbuf[:0], m.cv.data, m.rows[first:last], rowBytes)
			batch.Vertices.Data = sc.vbuf
		}
		if inv != nil {
			sc.owner, sc.ids = l.rowOwners(sc.owner, sc.ids, m, inv, first, last)
			batch.ObjectIDs = sc.ids
		}
		for k, a := range sel {
			data, ch, err := l.attribute(ctx, a, m.key, m.cv.rows)
			if err != nil {
				return false, err
			}
			w := ch * a.dt.Size
			col := Column{Name: a.Name, DType: a.dt.Name, typ: a.dt, Channels: ch, Categories: a.Categories, NullCode: a.nullCode}
			if m.all {
				col.Data = data[first*w : last*w]
			} else {
				sc.abufs[k] = gather(sc.abufs[k][:0], data, m.rows[first:last], w)
				col.Data = sc.abufs[k]
			}
			batch.Attributes = append(batch.Attributes, col)
		}
		sc.cols = batch.Attributes // keep the grown slice for the next chunk
		if wantConn {
			idx := make([]int32, m.cv.rows)
			for i := first; i < last; i++ {
				idx[m.row(i)] = int32(res.Count) + int32(i-first) + 1
			}
			answer = append(answer, idx)
			kept := *m // m is reused by the next window; connectivity needs key and vertices only
			kept.rows = nil
			emitted = append(emitted, &kept)
		}
		res.Count += int64(last - first)
		if err := emit(batch); err != nil {
			return true, err
		}
		return res.More, nil
	})
	if err != nil {
		return res, err
	}
	if wantConn {
		if err := l.bboxConnectivity(ctx, &res, emitted, answer, inv); err != nil {
			return res, err
		}
	}
	return res, nil
}

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
// grown; ids[:last-first] is the answer.
func (l *Level) rowOwners(owner, ids []int64, m *chunkMatch, inv *inverse, first, last int) ([]int64, []int64) {
	owner = slices.Grow(owner[:0], m.cv.rows)[:m.cv.rows]
	for i := range owner {
		owner[i] = -1
	}
	fi := m.cv.frags
	ci := inv.of(m.key)
	switch {
	case ci == nil: // no manifest names this chunk's fragments
	case fi == nil: // the chunk is one fragment
		if len(ci.frags) > 0 && ci.frags[0] == 0 {
			for i := range owner {
				owner[i] = ci.owner[0]
			}
		}
	default:
		for e, f := range ci.frags {
			if f < 0 || f >= int64(fi.Len()) {
				continue // a manifest naming a fragment the chunk does not have
			}
			id := ci.owner[e]
			if s, c, isRange := fi.Range(int(f)); isRange {
				for r := s; r < s+c; r++ {
					if owner[r] < 0 {
						owner[r] = id
					}
				}
				continue
			}
			for _, r := range fi.Indices(int(f)) {
				if owner[r] < 0 {
					owner[r] = id
				}
			}
		}
	}
	ids = slices.Grow(ids[:0], last-first)[:last-first]
	for i := first; i < last; i++ {
		ids[i-first] = owner[m.row(i)]
	}
	return owner, ids
}

// fragFirst returns the first row of fragment f of cv (a chunk without a
// fragment index is one fragment); ok is false when it is empty.
func fragFirst(cv *chunkVerts, f int) (int64, bool) {
	if cv.frags == nil {
		return 0, f == 0 && cv.rows > 0
	}
	if s, c, isRange := cv.frags.Range(f); isRange {
		return s, c > 0
	}
	ix := cv.frags.Indices(f)
	if len(ix) == 0 {
		return 0, false
	}
	return ix[0], true
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
