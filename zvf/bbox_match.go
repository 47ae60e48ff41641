package zvf

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"slices"
	"sync"

	"github.com/zvfserve/zvfserve/zvf/cql2"
	"github.com/zvfserve/zvfserve/zvf/zarr"
)

// chunkMatch is one chunk's rows inside a box.
type chunkMatch struct {
	key  Key
	cv   *chunkVerts
	all  bool    // every row matches
	rows []int32 // matching rows, ascending (when !all); may be a cached selection's (read only)
	// buf is the match's own row buffer, reused from chunk to chunk
	// (rows is either buf or a cached selection's rows).
	buf []int32
	// vdata, when set, holds the vertices of rows (a cached selection's
	// copy): one after another (vpos nil), so an answer slices them, or
	// row i's at position vpos[i], gathered from there. pbuf is the
	// match's own buffer for vpos.
	vdata      []byte
	vpos, pbuf []int32
	// owner holds every chunk row's object (-1: none) when owned: a
	// selection that reads objects found them.
	owner []int64
	owned bool
	// copy asks matchVerts to copy the matching rows' float32 × 3
	// vertices into vown as it finds them (vdata then): the test has
	// the row in hand, so the answer needs no second pass to gather
	// it. Set by the caller, kept (as vown) from chunk to chunk.
	copy bool
	vown []byte
	// dst, the pass's lender in every ring slot the request's own
	// goroutine matches (matches), lends a bytes-only match of a chunk
	// of lendRows or more, right before it is emitted, the encoder's free
	// space (BBoxQuery.VertexDst); lent is that space while the match
	// fills it. A reader matching ahead drops it: the space is only free
	// until the batches before its chunk are written.
	dst  VertexDst
	lent []byte
	// cold: the chunk was just read, and is matched on its reader's
	// goroutine (chunkReaders.one).
	cold bool
	// bytesOnly (with copy) says the answer needs the matching rows'
	// vertex bytes and nothing else of them: a binary answer with no
	// attribute, object id, filter or connectivity. Rows copied as they
	// are found are then not also numbered (the numbers of a 50k answer
	// are 200 KB written for nothing); noRows says this match's were not,
	// and its count is its bytes'.
	bytesOnly, noRows bool
	// bt is the query box's test, made once per matching pass (nil:
	// matchVerts makes it).
	bt *boxTest
	// cnt, when set (tests), counts the work matching does.
	cnt *matchCount
}

// matchCount is what matching a box cost: the rows its row kernels
// tested one by one (rows taken or skipped a bin at a time are not).
type matchCount struct {
	tested int
}

// reset makes m the match of chunk key (vertices cv) before any row is
// found, keeping the buffers and the settings of the pass and its caller
// (copy, bt, cnt, dst, cold): field by field, as a coarse level's answer
// resets it for every few rows.
func (m *chunkMatch) reset(key Key, cv *chunkVerts) {
	m.key, m.cv, m.all, m.rows, m.buf = key, cv, false, nil, nil
	m.vdata, m.vpos, m.lent = nil, nil, nil
	m.owner, m.owned, m.noRows = m.owner[:0], false, false
}

func (m *chunkMatch) count() int {
	switch {
	case m.all:
		return m.cv.rows
	case m.noRows:
		return len(m.vdata) / 12
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
	if l.grid != nil {
		return l.grid.appendIn(out, d, &lo, &hi)
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

// matchChunk finds the rows of chunk l.keys[i] (its vertices cv) inside
// [min, max] that the selection rf keeps (nil: all), into m (whose
// buffers are reused), with ev the filter's evaluator for this goroutine.
func (l *Level) matchChunk(ctx context.Context, i int32, cv *chunkVerts, min, max []float64, m *chunkMatch, rf *rowFilter, ev *cql2.Evaluator) error {
	if rf != nil && rf.sels != nil {
		return rf.matchSelected(ctx, i, cv, min, max, m)
	}
	l.matchVerts(l.keys[i], cv, min, max, m)
	if rf == nil {
		return nil
	}
	return rf.apply(ctx, m, ev)
}

func (l *Level) matchVerts(key Key, cv *chunkVerts, min, max []float64, m *chunkMatch) {
	rows := m.buf[:0]
	m.reset(key, cv)
	d := l.s.dims
	var cut uint16
	if m.bt != nil && m.bt.cover {
		if len(key) == 3 {
			cut = m.bt.cut3(key) // inlined: every chunk a box touches
		} else {
			cut = m.bt.cutOfAxes(key)
		}
	} else {
		cut = l.cutAxes(key, min, max)
	}
	if cut == 0 && (cv.inCell || l.rowsWithin(cv.data, min, max, 0, cv.rows)) {
		m.all, m.rows, m.buf = true, rows, rows
		return
	}
	// Rows that lie in their cell need only be tested on the axes where
	// the box cuts it: most chunks a box cuts are on one of its faces.
	axes := uint8(1)<<d - 1
	if cv.inCell && d == 3 {
		axes = uint8(cut)
	}
	var vout *[]byte
	if m.copy && m.f32(l, d) {
		m.vown = m.vown[:0]
		vout = &m.vown
		// A chunk just read: room for every row the box can keep, at
		// once. Grown by appending, its buffer (new when the scratch is)
		// was allocated three or four times over, doubling. (A cached
		// chunk's match keeps appending: its slot's buffer has grown to
		// fit before, and the bound would cost it a pass over its bins.)
		if m.cold && cap(m.vown) < 12*cv.rows {
			m.vown = l.ownRoom(m.vown, key, cv, min, max)
		}
		// The chunk's rows, or failing room for them the rows of the bins
		// the box overlaps, bound what it keeps: with that much room
		// lent, no append outgrows it.
		if m.bytesOnly && m.dst != nil && cv.rows >= lendRows {
			sp := m.dst.VertexSpace(12 * cv.rows)
			if sp == nil {
				sp = m.dst.VertexSpace(12 * l.keepBound(key, cv, min, max))
			}
			if sp != nil {
				m.lent = sp[:0]
				vout = &m.lent
			}
		}
	}
	bt := m.bt
	if bt == nil {
		bt = &boxTest{}
		*bt = newBoxTest(l.vdt, d, min, max)
	}
	bins := l.binsUsable(cv)
	if m.cnt != nil && !bins {
		m.cnt.tested += cv.rows
	}
	m.noRows = vout != nil && m.bytesOnly
	if bins {
		m.rows = l.matchBinsInto(rows, vout, m.noRows, bt, cv, key, min, max, cv.data, nil, m.cnt)
	} else if m.noRows {
		*vout = bt.appendCopy(*vout, cv.data, 0, cv.rows, axes)
	} else if vout != nil {
		m.rows, *vout = bt.appendMatchesCopy(rows, *vout, cv.data, 0, cv.rows, axes)
	} else {
		m.rows = bt.appendMatches(rows, cv.data, 0, cv.rows, axes)
	}
	if vout != nil {
		m.vdata = *vout
	}
	if vout == &m.lent {
		m.lent = nil // the encoder's: never kept past this chunk's batch
	}
	if m.noRows {
		m.rows, m.buf = nil, rows // rows' buffer, untouched, is kept for the next chunk
	} else {
		m.buf = m.rows // the grown buffer is kept for the next chunk
	}
}

// ownRoom is buf, emptied, with room for the float32 × 3 vertices of
// every row of chunk key (vertices cv) a match of the box [min, max] can
// keep (keepBound): buf itself when it has it, else a new buffer of just
// that size (what buf held is not needed: not copied).
func (l *Level) ownRoom(buf []byte, key Key, cv *chunkVerts, min, max []float64) []byte {
	if n := 12 * l.keepBound(key, cv, min, max); cap(buf) < n {
		return make([]byte, 0, n)
	}
	return buf[:0]
}

// f32 reports whether level l's vertices are float32 × 3 (d axes): from
// the pass's box test when set, which knew it once, not a string compare
// a chunk.
func (m *chunkMatch) f32(l *Level, d int) bool {
	if m.bt != nil {
		return m.bt.f32
	}
	return l.vdt.Name == "float32" && d == 3
}

// covers reports whether the box covers chunk key's cell. The chunk spans
// [c0, c1); it is wholly inside only if the box covers it with room (c1
// itself belongs to the next chunk, but a row there would be misfiled, so
// the exact test still guards).
func (l *Level) covers(key Key, min, max []float64) bool {
	d := l.s.dims
	off := l.keyArity - d
	for i := 0; i < d; i++ {
		c0 := float64(key[off+i]) * l.chunkShape[i]
		c1 := c0 + l.chunkShape[i]
		if !(min[i] <= c0 && c1 <= max[i]) {
			return false
		}
	}
	return true
}

// cutAxes has bit i set for each axis i on which the box does not cover
// chunk key's cell (covers' test, axis by axis): 0 when it covers it.
func (l *Level) cutAxes(key Key, min, max []float64) uint16 {
	d := l.s.dims
	off := l.keyArity - d
	var cut uint16
	for i := 0; i < d; i++ {
		c0 := float64(key[off+i]) * l.chunkShape[i]
		c1 := c0 + l.chunkShape[i]
		if !(min[i] <= c0 && c1 <= max[i]) {
			cut |= 1 << i
		}
	}
	return cut
}

// rowsWithin confirms rows [a, b) are all inside, stopping at the first
// that is not: the per-vertex test stays exact even for a chunk the box
// covers (a corrupt store may file rows in the wrong chunk).
func (l *Level) rowsWithin(data []byte, min, max []float64, a, b int) bool {
	d := l.s.dims
	if l.vdt.Name == "float32" && d == 3 {
		x0, y0, z0, x1, y1, z1 := min[0], min[1], min[2], max[0], max[1], max[2]
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
			v := l.vdt.At(data, r*d+i).Float64()
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
// are skipped without touching their rows. The rows are data's: the
// chunk's (starts nil: bin f's rows are its fragment's), or a selection's
// vertices, bin f's at positions starts[f] … starts[f+1]-1.
func (l *Level) matchBins(out []int32, cv *chunkVerts, key Key, min, max []float64, data []byte, starts []int32) []int32 {
	bt := newBoxTest(l.vdt, l.s.dims, min, max)
	return l.matchBinsInto(out, nil, false, &bt, cv, key, min, max, data, starts, nil)
}

// matchBinsInto is matchBins that also appends the matching rows' bytes
// to *vout when vout is set (float32 × 3 rows only; with bytesOnly, only
// the bytes: the rows are not numbered); bt is the box's test, cnt (nil:
// none) counts the work.
func (l *Level) matchBinsInto(out []int32, vout *[]byte, bytesOnly bool, bt *boxTest, cv *chunkVerts, key Key, min, max []float64, data []byte, starts []int32, cnt *matchCount) []int32 {
	d := l.s.dims
	bytesOnly = bytesOnly && vout != nil
	// Only the bins in the sub-grid the box overlaps are visited. A
	// chunk's own rows (starts nil: a selection's are tested as they
	// are) skip the bins the box only touches when none of its rows lies
	// on a face of its bin.
	sp, ok := l.boxBins(key, min, max, starts == nil && l.faceFree(key, cv))
	if !ok {
		return out
	}
	first, last, covers := &sp.first, &sp.last, &sp.covers
	var idx [maxDims]int64
	for i := 0; i < d; i++ {
		idx[i] = first[i]
	}
	// The bins of one line along the last axis are visited in a tight
	// loop. Consecutive rows all taken are appended as one run, and
	// consecutive rows to test are tested at once.
	z := d - 1
	zCovered := true // the box covers every bin of a line it overlaps
	for b := first[z]; b <= last[z]; b++ {
		zCovered = zCovered && b < 64 && covers[z][b]
	}
	// A bin whose rows lie in its cell need only be tested on the axes
	// where the box cuts it (most cut bins are on a face of the box: one
	// axis); other rows are tested on every axis.
	all := uint8(1)<<d - 1
	runStart, runEnd, taken, runAxes := int64(0), int64(0), false, all
	flush := func() {
		if cnt != nil && !taken {
			cnt.tested += int(runEnd - runStart)
		}
		switch {
		case taken && bytesOnly:
			*vout = append(*vout, data[12*runStart:12*runEnd]...)
		case runEnd > runStart && bytesOnly:
			*vout = bt.appendCopy(*vout, data, int(runStart), int(runEnd), runAxes)
		case taken && vout != nil:
			*vout = append(*vout, data[12*runStart:12*runEnd]...)
			fallthrough
		case taken:
			out = appendRun(out, int32(runStart), int(runEnd-runStart))
		case runEnd > runStart && vout != nil:
			out, *vout = bt.appendMatchesCopy(out, *vout, data, int(runStart), int(runEnd), runAxes)
		case runEnd > runStart:
			out = bt.appendMatches(out, data, int(runStart), int(runEnd), runAxes)
		}
	}
	add := func(start, end int64, take bool, axes uint8) {
		if start == end {
			return
		}
		if take == taken && start == runEnd && (take || axes == runAxes) {
			runEnd = end
			return
		}
		flush()
		runStart, runEnd, taken, runAxes = start, end, take, axes
	}
	for {
		base, outer, lineAxes := int64(0), true, uint8(0)
		for i := 0; i < z; i++ {
			base = base*l.bpc[i] + idx[i]
			in := idx[i] < 64 && covers[i][idx[i]]
			outer = outer && in
			if !in {
				lineAxes |= 1 << i
			}
		}
		base *= l.bpc[z]
		f0, f1 := base+first[z], base+last[z]
		switch {
		// A selection's line is one range of positions: tested whole
		// where the box cuts it on another axis, taken whole where the
		// box covers it and its rows were found in their bins.
		case starts != nil && !outer:
			add(int64(starts[f0]), int64(starts[f1+1]), false, all)
		case starts != nil && zCovered && cv.binsInside(int(f0), int(f1)):
			add(int64(starts[f0]), int64(starts[f1+1]), true, all)
		default:
			for b := first[z]; b <= last[z]; b++ {
				f := base + b
				var start, count int64
				if starts == nil {
					start, count = cv.binRange(int(f))
				} else {
					start, count = int64(starts[f]), int64(starts[f+1]-starts[f])
				}
				// A covered bin takes all its rows when they were found
				// in their bin's cell at decode time (otherwise they are
				// tested).
				zIn := b < 64 && covers[z][b]
				inside := count > 0 && cv.binInside(int(f))
				take := count > 0 && outer && zIn && (inside || l.rowsWithin(data, min, max, int(start), int(start+count)))
				axes := all
				if inside && starts == nil {
					axes = lineAxes
					if !zIn {
						axes |= 1 << z
					}
				}
				add(start, start+count, take, axes)
			}
		}
		// Next line of the sub-grid.
		i := z - 1
		for ; i >= 0; i-- {
			if idx[i] < last[i] {
				idx[i]++
				break
			}
			idx[i] = first[i]
		}
		if i < 0 {
			flush()
			return out
		}
	}
}

// lendRows is the fewest rows a chunk must hold to be matched into lent
// space (VertexDst): below, the copy it saves costs less than lending
// (a coarse level=auto answer's cut chunks keep a dozen rows each, and
// lending to them cost 3 % more instructions a request, cachegrind).
const lendRows = 64

// keepBound is the most rows of chunk key (vertices cv) a match of the
// box [min, max] can keep: the rows of the bins matchBinsInto visits when
// the chunk's bins are known, else all of them. A box that cuts a dense
// chunk on one face keeps a few of its bins' rows, so far less room is
// asked of a lender (VertexDst) than the whole chunk's.
func (l *Level) keepBound(key Key, cv *chunkVerts, min, max []float64) int {
	if !l.binsUsable(cv) {
		return cv.rows
	}
	sp, ok := l.boxBins(key, min, max, l.faceFree(key, cv))
	if !ok {
		return 0
	}
	d := l.s.dims
	var idx [maxDims]int64
	copy(idx[:d], sp.first[:d])
	n := int64(0)
	for {
		f := int64(0)
		for i := 0; i < d-1; i++ {
			f = f*l.bpc[i] + idx[i]
		}
		f *= l.bpc[d-1]
		if cv.bins != nil { // a line's bins' rows are one range
			n += int64(cv.bins[f+sp.last[d-1]+1] - cv.bins[f+sp.first[d-1]])
		} else {
			for b := sp.first[d-1]; b <= sp.last[d-1]; b++ {
				_, c := cv.binRange(int(f + b))
				n += c
			}
		}
		i := d - 2
		for ; i >= 0; i-- {
			if idx[i] < sp.last[i] {
				idx[i]++
				break
			}
			idx[i] = sp.first[i]
		}
		if i < 0 {
			return int(n)
		}
	}
}

// boxBins is, per axis, the run of a chunk's bins a box overlaps
// (first … last) and which of those it covers (bins past the 64th count
// as cut).
type boxBins struct {
	first, last [maxDims]int64
	covers      [maxDims][64]bool
}

// boxBins finds the bins of chunk key the closed box [min, max] overlaps,
// with the same arithmetic as binBox; ok is false when it overlaps none.
// open: no row lies on a face of its bin's cell (see faceFree), so a bin
// the box only touches, at a face, holds no row in the box and is left
// out (a tile-aligned box otherwise tests the whole layer of bins beyond
// each of its faces, to keep none of their rows).
func (l *Level) boxBins(key Key, min, max []float64, open bool) (sp boxBins, ok bool) {
	for i := 0; i < l.s.dims; i++ {
		sp.first[i], sp.last[i] = -1, -2
		n := l.bpc[i]
		for b := int64(0); b < n; b++ {
			b0 := float64(key[i]*n+b) * l.binShape[i]
			b1 := b0 + l.binShape[i]
			if b1 < min[i] || b0 > max[i] || open && (b1 == min[i] || b0 == max[i]) {
				continue
			}
			if sp.first[i] < 0 {
				sp.first[i] = b
			}
			sp.last[i] = b
			if b < 64 {
				sp.covers[i][b] = min[i] <= b0 && b1 <= max[i]
			}
		}
		if sp.first[i] < 0 {
			return sp, false
		}
	}
	return sp, true
}

// faceFree reports whether every row of cv lies strictly inside its
// bin's cell on every axis (float32 × 3 rows, every bin's rows in its
// closed cell): found once per cached chunk, in one pass over its rows.
// Rows of uniform data never lie on a face; rows on a grid (integer
// coordinates, bins of whole units) may, and are then matched as before.
func (l *Level) faceFree(key Key, cv *chunkVerts) bool {
	switch cv.faces.Load() {
	case facesFree:
		return true
	case facesTouched:
		return false
	}
	v := int32(facesTouched)
	if l.findFaceFree(key, cv) {
		v = facesFree
	}
	cv.faces.Store(v) // racing finders find the same
	return v == facesFree
}

// chunkVerts.faces: not yet known (0), or what faceFree found.
const (
	facesFree    = 1
	facesTouched = 2
)

func (l *Level) findFaceFree(key Key, cv *chunkVerts) bool {
	if l.vdt.Name != "float32" || l.s.dims != 3 || len(key) != 3 {
		return false
	}
	var lo, hi [3]float64
	for f := 0; f < int(prod(l.bpc)); f++ {
		if !cv.binInside(f) {
			return false
		}
		start, count := cv.binRange(f)
		if count == 0 {
			continue
		}
		l.binBox(key, f, lo[:], hi[:])
		for r := start; r < start+count; r++ {
			p := cv.data[12*r : 12*r+12 : 12*r+12]
			x := float64(math.Float32frombits(binary.LittleEndian.Uint32(p)))
			y := float64(math.Float32frombits(binary.LittleEndian.Uint32(p[4:])))
			z := float64(math.Float32frombits(binary.LittleEndian.Uint32(p[8:])))
			if x == lo[0] || x == hi[0] || y == lo[1] || y == hi[1] || z == lo[2] || z == hi[2] {
				return false
			}
		}
	}
	return true
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

// binInside reports whether bin f's rows were all found in its cell
// (always, for bins found from the rows themselves).
func (cv *chunkVerts) binInside(f int) bool {
	return cv.bins != nil || (f>>6 < len(cv.binIn) && cv.binIn[f>>6]&(1<<(f&63)) != 0)
}

// binRange is bin f's rows, [start, start+count).
func (cv *chunkVerts) binRange(f int) (start, count int64) {
	if cv.bins != nil {
		return int64(cv.bins[f]), int64(cv.bins[f+1] - cv.bins[f])
	}
	start, count, _ = cv.frags.Range(f)
	return start, count
}

// binsInside reports whether bins f0 … f1 all had their rows found in
// their cells.
func (cv *chunkVerts) binsInside(f0, f1 int) bool {
	for f := f0; f <= f1; f++ {
		if !cv.binInside(f) {
			return false
		}
	}
	return true
}

// binsUsable reports whether cv's bins are known: found from its rows,
// or its fragments are its bins (fragment = bin, all ranges), so the bin
// prefilter applies.
func (l *Level) binsUsable(cv *chunkVerts) bool {
	return l.binPrefilter && (cv.bins != nil || cv.frags != nil && int64(cv.frags.Len()) == prod(l.bpc) && cv.frags.NumRanges() == cv.frags.Len())
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
	cv.inCell = l.rowsWithin(cv.data, lo[:d], hi[:d], 0, cv.rows)
	if !l.binsUsable(cv) {
		return
	}
	n := cv.frags.Len()
	cv.binIn = make([]uint64, (n+63)/64)
	for f := 0; f < n; f++ {
		start, count, _ := cv.frags.Range(f)
		l.binBox(key, f, lo[:d], hi[:d])
		if l.rowsWithin(cv.data, lo[:d], hi[:d], int(start), int(start+count)) {
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
// concurrently (at most l.s.conc at a time), in key order, up to a ring
// of 4·conc chunks ahead of fn. fn takes each chunk's match as soon as
// that chunk and every one before it are matched, so an answer's first
// rows leave while later chunks are still read, and reads do not wait for
// the answer's writes (only for room in the ring). The *chunkMatch handed
// to fn is reused after fn returns. The query's selection (sc.rf) narrows
// every chunk's rows the same way wherever it is matched: for the page,
// for the earlier chunks a page reaches back to, for counts.
func (l *Level) matches(ctx context.Context, sc *bboxScratch, cand []int32, min, max []float64, fn func(*chunkMatch) (stop bool, err error)) error {
	rf := sc.rf
	if rf != nil && rf.none {
		return nil // no row of the level can pass: nothing is read
	}
	ring := 4 * l.s.conc
	if len(sc.ms) < ring {
		sc.ms = make([]chunkMatch, ring)
		sc.slots = make([]matchSlot, ring)
	}
	ms, slots := sc.ms[:ring], sc.slots[:ring]
	used := len(cand) // the ring positions this pass takes
	if used > ring {
		used = ring
	}
	if used > sc.msUsed {
		sc.msUsed = used
	}
	sc.bt = newBoxTest(l.vdt, l.s.dims, min, max)
	sc.bt.setCover(l)
	// Every slot holds the pass's lender (sc.dst; set only when the
	// answer's bytes alone are wanted): a slot a reader matches ahead
	// drops it there (chunkReaders.one) and gets it back when the
	// request takes that chunk, so a cached chunk pays no store for it.
	// Only the positions this pass takes: putScratch clears those, so a
	// pooled scratch keeps no lender (an encoder and its body buffer).
	for j := range ms[:used] {
		ms[j].copy, ms[j].bytesOnly, ms[j].bt, ms[j].dst = sc.copy && rf == nil, sc.bytesOnly && rf == nil, &sc.bt, sc.dst
	}
	// The readers start at the first chunk not in the cache (a warm
	// answer starts none); stop ends their reads and waits for them. They
	// live in the scratch, so a warm answer allocates nothing for them.
	rd := &sc.rd
	*rd = chunkReaders{l: l, cand: cand, ms: ms, slots: slots, min: min, max: max, rf: rf}
	defer rd.stop()
	hits := 0
	defer func() { l.s.countHits(hits) }()
	// at and issuedAt are c%ring and issued%ring, kept by wrapping: a
	// division each per chunk cost as much as a coarse chunk's rows.
	issued, issuedAt, at := 0, 0, 0
	for c := range cand {
		// Chunks c … c+ring-1 are cached (and held) or being read.
		for ; issued < len(cand) && issued < c+ring; issued, issuedAt = issued+1, ringNext(issuedAt, ring) {
			s := &slots[issuedAt]
			i := cand[issued]
			if v, ok := l.peekVertsTally(i, &hits); ok && (rf == nil || rf.cachedAt(i)) {
				*s = matchSlot{cv: v.(*chunkVerts)}
				continue
			}
			*s = matchSlot{done: make(chan struct{})}
			rd.read(ctx, issued)
		}
		if at == 0 {
			if err := ctx.Err(); err != nil {
				return err // a long answer from the cache still stops when its request does
			}
		}
		s, m := &slots[at], &ms[at]
		at = ringNext(at, ring)
		if s.done == nil {
			// fn emits this chunk next: the encoder's free space (m.dst)
			// is its to match into.
			if rf == nil { // matchChunk's first step, without its call
				l.matchVerts(l.keys[cand[c]], s.cv, min, max, m)
			} else if err := l.matchChunk(ctx, cand[c], s.cv, min, max, m, rf, rf.mainEvaluator()); err != nil {
				return err
			}
			s.cv = nil
		} else {
			if sc.waiting != nil && !closed(s.done) {
				sc.waiting.WaitingForStorage()
			}
			<-s.done // a reader always closes it, even cancelled
			if s.err != nil {
				return rd.cause(ctx, s.err)
			}
			m.dst = sc.dst // the reader dropped it; the slot is the request's again
		}
		stop, err := fn(m)
		if err != nil || stop {
			return err
		}
	}
	return nil
}

// ringNext is the ring position after i in a ring of n.
func ringNext(i, n int) int {
	if i++; i == n {
		return 0
	}
	return i
}

// matchSlot is one place of matches' ring: a chunk found in the cache
// (cv), or one a reader reads and matches (done closed when it has, with
// err its failure).
type matchSlot struct {
	cv   *chunkVerts
	done chan struct{}
	err  error
}

// chunkReaders read and match the chunks matches hands them, in the
// order handed, each into its ring slot.
type chunkReaders struct {
	l        *Level
	cand     []int32
	ms       []chunkMatch
	slots    []matchSlot
	min, max []float64
	rf       *rowFilter

	jobs   chan int // positions in cand; room for a whole ring, so handing one never waits
	cancel context.CancelFunc
	wg     sync.WaitGroup
	first  error // the first read to fail (under mu): the others were cancelled for it
	mu     sync.Mutex
}

// read hands position c to the readers, starting them at the first.
func (rd *chunkReaders) read(ctx context.Context, c int) {
	if rd.jobs == nil {
		var rctx context.Context
		rctx, rd.cancel = context.WithCancel(ctx)
		rd.jobs = make(chan int, len(rd.slots))
		n := min(rd.l.s.conc, len(rd.cand)-c)
		rd.wg.Add(n)
		for range n {
			go rd.run(rctx)
		}
	}
	rd.jobs <- c
}

func (rd *chunkReaders) run(ctx context.Context) {
	defer rd.wg.Done()
	ev := rd.rf.evaluator()
	defer rd.rf.release(ev)
	ring := len(rd.slots)
	for c := range rd.jobs {
		s := &rd.slots[c%ring]
		s.err = rd.one(ctx, c, ev)
		if s.err != nil {
			rd.mu.Lock()
			if rd.first == nil {
				rd.first = s.err
				rd.cancel() // the answer fails: the reads ahead are not needed
			}
			rd.mu.Unlock()
		}
		close(s.done)
	}
}

// one reads and matches chunk cand[c].
func (rd *chunkReaders) one(ctx context.Context, c int, ev *cql2.Evaluator) (err error) {
	defer rd.l.s.recoverInto(&err, "bbox chunk")
	if err := ctx.Err(); err != nil {
		return err
	}
	i := rd.cand[c]
	cv, err := rd.l.verticesAt(ctx, i)
	if err != nil {
		return err
	}
	m := &rd.ms[c%len(rd.ms)]
	m.dst = nil // space lent is free only until the batches before this chunk are written
	m.cold = true
	err = rd.l.matchChunk(ctx, i, cv, rd.min, rd.max, m, rd.rf, ev)
	m.cold = false
	return err
}

// cause is the error an answer fails with when chunk c's read failed with
// err: the read that failed first, when c's was cancelled for it (as an
// errgroup answers), else err.
func (rd *chunkReaders) cause(ctx context.Context, err error) error {
	rd.mu.Lock()
	first := rd.first
	rd.mu.Unlock()
	if first != nil && ctx.Err() == nil && errors.Is(err, context.Canceled) {
		return first
	}
	return err
}

// stop ends the reads not yet taken or under way and waits for the
// readers, so none outlives its answer; then it lets go of the answer's
// memory.
func (rd *chunkReaders) stop() {
	if rd.jobs != nil {
		rd.cancel()
		close(rd.jobs)
		rd.wg.Wait()
	}
	*rd = chunkReaders{}
}

// boxTest tests rows against a closed box. float32 × 3 rows are compared
// in float32 against bounds that give the same verdict as the float64
// comparison (see f32Bounds), one axis alone where the caller knows the
// others hold; as integers where those bounds are runs (see rowBits: of
// bits where every axis tested lies above zero or below it, else of
// keys), so as floats only for empty bounds or NaN ones.
type boxTest struct {
	dt       zarr.DataType
	d        int
	min, max []float64
	f32      bool
	lo, hi   [3]float32
	bits     rowBits // lo, hi as runs of bits, where they are (f32)
	// cover, when set (setCover), holds per axis the run of chunk
	// coordinates whose cells the box covers, so a chunk's cut axes are
	// integer compares instead of cutAxes' float arithmetic per chunk.
	// Per axis: cLo the run's first coordinate, cSpan its last less
	// cLo (c is in the run when uint64(c-cLo) <= cSpan: one compare);
	// cEmpty has the bits of axes whose run is empty (every chunk cut).
	cover  bool
	cLo    [3]int64
	cSpan  [3]uint64
	cEmpty uint16
	// goRows keeps the row kernels off their fastest path: in Go, or on
	// the AVX2 steps (tests compare the paths).
	goRows rowPath
}

// setCover fills t's cover runs for level l's chunks (d ≤ 3 axes), or
// leaves cover false when an axis's bound is not a finite number
// cutAxes can be matched on.
func (t *boxTest) setCover(l *Level) {
	t.cover = false
	d := l.s.dims
	if d > 3 || l.keyArity != d {
		return
	}
	t.cEmpty = 0
	for i := 0; i < d; i++ {
		a, b, ok := coverRun(l.chunkShape[i], t.min[i], t.max[i])
		if !ok {
			return
		}
		t.cLo[i], t.cSpan[i] = a, uint64(b-a)
		if b < a {
			t.cLo[i], t.cSpan[i], t.cEmpty = 0, 0, t.cEmpty|1<<i
		}
	}
	t.cover = true
}

// coverRun is the run [a, b] of chunk coordinates c whose cells [c·cs,
// c·cs+cs] lie in [lo, hi] by cutAxes' own float64 test; both halves of
// the test are monotone in c, so the cells covered are a run, found from
// an estimate by stepping until the test flips. ok is false for bounds
// beyond exact float64 integers (or NaN), which keep cutAxes.
func coverRun(cs, lo, hi float64) (a, b int64, ok bool) {
	const exact = 1 << 52
	fa, fb := math.Ceil(lo/cs), math.Floor(hi/cs)-1
	if !(cs > 0 && math.Abs(fa) < exact && math.Abs(fb) < exact) {
		return 0, 0, false
	}
	a, b = int64(fa), int64(fb)
	for lo <= float64(a-1)*cs {
		a--
	}
	for !(lo <= float64(a)*cs) {
		a++
	}
	for float64(b+1)*cs+cs <= hi {
		b++
	}
	for !(float64(b)*cs+cs <= hi) {
		b--
	}
	return a, b, true
}

// cut3 is cutAxes from t's cover runs (t.cover set) for keys of three
// axes, unrolled so that it inlines: it runs for every chunk an answer
// matches, and a loop's bounds checks cost more than its compares.
func (t *boxTest) cut3(key Key) uint16 {
	k := key[:3]
	cut := t.cEmpty
	if uint64(k[0]-t.cLo[0]) > t.cSpan[0] {
		cut |= 1
	}
	if uint64(k[1]-t.cLo[1]) > t.cSpan[1] {
		cut |= 2
	}
	if uint64(k[2]-t.cLo[2]) > t.cSpan[2] {
		cut |= 4
	}
	return cut
}

// cutOfAxes is cut3 for fewer than three axes.
func (t *boxTest) cutOfAxes(key Key) uint16 {
	cut := t.cEmpty
	for i := 0; i < len(key) && i < len(t.cLo); i++ {
		if uint64(key[i]-t.cLo[i]) > t.cSpan[i] {
			cut |= 1 << i
		}
	}
	return cut
}

func newBoxTest(dt zarr.DataType, d int, min, max []float64) boxTest {
	t := boxTest{dt: dt, d: d, min: min, max: max, f32: dt.Name == "float32" && d == 3}
	if t.f32 {
		for i := range 3 {
			t.lo[i], t.hi[i] = f32Bounds(min[i], max[i])
		}
		t.bits = newRowBits(t.lo, t.hi)
	}
	return t
}

// f32Bounds returns the float32 bounds lo, hi such that, for every
// float32 x, lo <= x <= hi exactly when min <= float64(x) <= max: lo is
// the least float32 not below min, hi the greatest not above max (±Inf
// where none is finite). NaN rows fail both comparisons either way.
func f32Bounds(min, max float64) (lo, hi float32) {
	lo = float32(min) // nearest; step up while below min
	for float64(lo) < min {
		lo = math.Nextafter32(lo, float32(math.Inf(1)))
	}
	for p := math.Nextafter32(lo, float32(math.Inf(-1))); p != lo && float64(p) >= min; p = math.Nextafter32(lo, float32(math.Inf(-1))) {
		lo = p
	}
	hi = float32(max)
	for float64(hi) > max {
		hi = math.Nextafter32(hi, float32(math.Inf(-1)))
	}
	for p := math.Nextafter32(hi, float32(math.Inf(1))); p != hi && float64(p) <= max; p = math.Nextafter32(hi, float32(math.Inf(1))) {
		hi = p
	}
	return lo, hi
}

// bitsFor says whether the rows can be tested on axes (0: every axis)
// as bits or keys (see rowBits), and how: the one axis tested (or -1),
// the runs the kernels take, and whether they are of keys (bits where
// both apply: the cheaper test).
func (t *boxTest) bitsFor(axes uint8) (ok bool, axis int, runs bitRuns, keyed bool) {
	if axes == 0 {
		axes = 7
	}
	if !t.f32 || axes&t.bits.okKey != axes {
		return false, 0, runs, false
	}
	keyed = axes&t.bits.ok != axes
	axis = -1
	if axes&(axes-1) == 0 {
		axis = bits.TrailingZeros8(axes)
	}
	return true, axis, t.bits.runs(axes, keyed), keyed
}

// appendMatches appends the rows in [a, b) inside the box, tested on the
// axes set in axes (the caller knows the rows hold on the others).
func (t *boxTest) appendMatches(out []int32, data []byte, a, b int, axes uint8) []int32 {
	if !t.f32 {
		return appendMatches(out, data, t.dt, t.d, a, b, t.min, t.max)
	}
	if ok, axis, runs, keyed := t.bitsFor(axes); ok {
		return matchBits(out, nil, data[12*a:12*b], int32(a), axis, &runs, keyed, t.goRows)
	}
	n := len(out)
	out = slices.Grow(out, b-a)[:n+b-a]
	if axes != 0 && axes&(axes-1) == 0 { // one axis: one value a row
		i := bits.TrailingZeros8(axes)
		lo, hi := t.lo[i], t.hi[i]
		for r := a; r < b; r++ {
			v := math.Float32frombits(binary.LittleEndian.Uint32(data[12*r+4*i:]))
			out[n] = int32(r)
			n += b2i(v >= lo) & b2i(v <= hi)
		}
		return out[:n]
	}
	// Branch-free as appendMatches: rows near the faces match at random.
	x0, y0, z0, x1, y1, z1 := t.lo[0], t.lo[1], t.lo[2], t.hi[0], t.hi[1], t.hi[2]
	for r := a; r < b; r++ {
		p := data[12*r : 12*r+12 : 12*r+12]
		x := math.Float32frombits(binary.LittleEndian.Uint32(p))
		y := math.Float32frombits(binary.LittleEndian.Uint32(p[4:]))
		z := math.Float32frombits(binary.LittleEndian.Uint32(p[8:]))
		out[n] = int32(r)
		n += b2i(x >= x0) & b2i(x <= x1) & b2i(y >= y0) & b2i(y <= y1) & b2i(z >= z0) & b2i(z <= z1)
	}
	return out[:n]
}

// appendMatchesCopy is appendMatches for float32 × 3 rows that also
// appends each matching row's 12 bytes to vout: every tested row is
// written and the ends advance only for a match, as the rows do.
func (t *boxTest) appendMatchesCopy(out []int32, vout, data []byte, a, b int, axes uint8) ([]int32, []byte) {
	if ok, axis, runs, keyed := t.bitsFor(axes); ok {
		out = matchBits(out, &vout, data[12*a:12*b], int32(a), axis, &runs, keyed, t.goRows)
		return out, vout
	}
	n, v := len(out), len(vout)
	out = slices.Grow(out, b-a)[:n+b-a]
	vout = slices.Grow(vout, 12*(b-a))[:v+12*(b-a)]
	if axes != 0 && axes&(axes-1) == 0 {
		i := bits.TrailingZeros8(axes)
		lo, hi := t.lo[i], t.hi[i]
		for r := a; r < b; r++ {
			p := data[12*r : 12*r+12 : 12*r+12]
			x := math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
			*(*[12]byte)(vout[v : v+12]) = [12]byte(p)
			out[n] = int32(r)
			k := b2i(x >= lo) & b2i(x <= hi)
			n += k
			v += 12 * k
		}
		return out[:n], vout[:v]
	}
	x0, y0, z0, x1, y1, z1 := t.lo[0], t.lo[1], t.lo[2], t.hi[0], t.hi[1], t.hi[2]
	for r := a; r < b; r++ {
		p := data[12*r : 12*r+12 : 12*r+12]
		x := math.Float32frombits(binary.LittleEndian.Uint32(p))
		y := math.Float32frombits(binary.LittleEndian.Uint32(p[4:]))
		z := math.Float32frombits(binary.LittleEndian.Uint32(p[8:]))
		*(*[12]byte)(vout[v : v+12]) = [12]byte(p)
		out[n] = int32(r)
		k := b2i(x >= x0) & b2i(x <= x1) & b2i(y >= y0) & b2i(y <= y1) & b2i(z >= z0) & b2i(z <= z1)
		n += k
		v += 12 * k
	}
	return out[:n], vout[:v]
}

// appendCopy is appendMatchesCopy without the row numbers: it appends
// the 12 bytes of each row of [a, b) inside the box to vout.
func (t *boxTest) appendCopy(vout, data []byte, a, b int, axes uint8) []byte {
	if ok, axis, runs, keyed := t.bitsFor(axes); ok {
		return copyBits(vout, data[12*a:12*b], axis, &runs, keyed, t.goRows)
	}
	v := len(vout)
	vout = slices.Grow(vout, 12*(b-a))[:v+12*(b-a)]
	if axes != 0 && axes&(axes-1) == 0 {
		i := bits.TrailingZeros8(axes)
		lo, hi := t.lo[i], t.hi[i]
		// Rows walked as the rest of the slice, so a row's bounds are
		// checked by the loop's own length test (not per row as well).
		for rows := data[12*a : 12*b]; len(rows) >= 12; rows = rows[12:] {
			x := math.Float32frombits(binary.LittleEndian.Uint32(rows[4*i:]))
			*(*[12]byte)(vout[v : v+12]) = [12]byte(rows[:12])
			v += 12 * (b2i(x >= lo) & b2i(x <= hi))
		}
		return vout[:v]
	}
	x0, y0, z0, x1, y1, z1 := t.lo[0], t.lo[1], t.lo[2], t.hi[0], t.hi[1], t.hi[2]
	for rows := data[12*a : 12*b]; len(rows) >= 12; rows = rows[12:] {
		x := math.Float32frombits(binary.LittleEndian.Uint32(rows))
		y := math.Float32frombits(binary.LittleEndian.Uint32(rows[4:]))
		z := math.Float32frombits(binary.LittleEndian.Uint32(rows[8:]))
		*(*[12]byte)(vout[v : v+12]) = [12]byte(rows[:12])
		v += 12 * (b2i(x >= x0) & b2i(x <= x1) & b2i(y >= y0) & b2i(y <= y1) & b2i(z >= z0) & b2i(z <= z1))
	}
	return vout[:v]
}

// closed reports whether ch is closed (a read slot's done), without
// waiting.
func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
