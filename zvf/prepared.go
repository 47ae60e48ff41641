package zvf

import (
	"context"
	"encoding/binary"
	"math"
	"slices"
	"sync/atomic"

	"github.com/zvfserve/zvfserve/cache"
)

// chunkPrep is what every bbox of a cached chunk would otherwise rebuild
// from its fragment index and the level's inverse map, prepared once per
// chunk and kept with its vertices (chunkVerts.prep): where each
// fragment's rows start, which object owns each fragment, and which entry
// of the inverse map continues it. With it a bbox's object ids and
// streamline edges cost what the answer holds, not what the chunks it
// cuts hold. Only chunks whose fragments are consecutive row ranges in
// fragment order (what writers produce) get one; for the others the
// answer walks every row as before.
type chunkPrep struct {
	// bounds: fragment f holds rows [bounds[f], bounds[f+1]).
	bounds []int32
	// owner: per fragment, the first object naming it, -1 when none (nil
	// when the level has no objects).
	owner []int64
	// cont: per fragment, what continues its streamline (see contEntry);
	// nil without an inverse map. One entry a fragment, not three
	// tables: a continuation is one cache line of the preparation.
	cont []contEntry
	// ids: every row's owner as the binary format writes it (little-
	// endian int64; nil without owners), so a covered chunk's ids are a
	// slice of it and a cut chunk's a gather of its rows.
	ids []byte
	// edges: on a line level with objects, the edges a page holding the
	// whole chunk gives it, in the binary format's form with chunk-local
	// indices (a|b<<32), in lineEdges' order, except those to another
	// chunk, which depend on the answer: holes says where they go. Such
	// a chunk's edges are then copies with its first answer index added,
	// between holes, instead of a walk a fragment (most continuations
	// stay in their chunk: of the 50k bench box's 5,838, 4,616 do).
	edges []uint64
	holes []edgeHole
	// oneRow: every fragment is one row (fragment f is row f), as at a
	// coarse level, where a streamline keeps a vertex a cell.
	oneRow bool
}

// edgeHole: before edges[at], lineEdges follows fragment f's
// continuation into another chunk.
type edgeHole struct{ at, f int32 }

// contEntry says which fragment continues a fragment's streamline:
// frag in this chunk when in is contSelf, in the chunk of the level's key
// index in when it is 0 or more; in is contNone when nothing continues it
// (or the chunk named is none of the level's). Taken from the inverse map
// once, so a request follows a continuation with a few loads instead of
// a walk of the map's entries and a search of its candidates. row, for a
// fragment continued in another chunk: the continuing fragment's first
// row there — contRowUnknown until an answer that holds that chunk has
// looked it up in its preparation, -1 when that fragment is empty — so a
// later answer finds the row without loading the other chunk's bounds (a
// cache miss a continuation). Every answer that fills it stores the same
// value.
type contEntry struct {
	in, frag int32
	row      atomic.Int32
}

// contEntry.in's values that are not neighbour indices.
const (
	contNone = -1
	contSelf = -2
)

// contRowUnknown: a contEntry.row not looked up yet.
const contRowUnknown = -3

// prepBytes is what a chunk's preparation may hold, counted with its
// vertices when they are cached (the preparation is built later, on the
// first bbox that needs it); objects: the level has an object index (its
// chunks' preparations then hold every row's owner).
// lines: the level's geometry is a line's (with objects, its chunks'
// preparations hold their edges too).
func prepBytes(cv *chunkVerts, objects, lines bool) int64 {
	nf := 1
	if cv.frags != nil {
		nf = cv.frags.Len()
	}
	n := 64 + 24*int64(nf+1) // bounds, owner, cont
	if objects {
		n += 8 * int64(cv.rows) // ids
		if lines {
			n += 8*int64(cv.rows) + 8*int64(nf) // edges (one a row at most), holes (one a fragment)
		}
	}
	return n
}

// prepared returns cv's preparation, building it on first use; nil when
// the chunk's fragments are not consecutive ranges. inv is the level's
// inverse map (nil when it has no objects), the same on every call for a
// level, so concurrent builders build equal values and either may win.
func (cv *chunkVerts) prepared(key Key, inv *inverse) *chunkPrep {
	if p := cv.prep.Load(); p != nil {
		return p.get()
	}
	p := &prepSlot{p: buildPrep(cv, key, inv)}
	if !cv.prep.CompareAndSwap(nil, p) {
		p = cv.prep.Load()
	}
	return p.get()
}

// prepSlot holds a preparation or the verdict that there is none.
type prepSlot struct{ p *chunkPrep }

func (s *prepSlot) get() *chunkPrep { return s.p }

func buildPrep(cv *chunkVerts, key Key, inv *inverse) *chunkPrep {
	nf := 1
	if cv.frags != nil {
		nf = cv.frags.Len()
	}
	p := &chunkPrep{bounds: make([]int32, nf+1)}
	if cv.frags == nil {
		p.bounds[1] = int32(cv.rows)
	} else {
		at := int64(0)
		for f := range nf {
			s, c, isRange := cv.frags.Range(f)
			if !isRange || (c > 0 && s != at) {
				return nil
			}
			at += c
			p.bounds[f+1] = int32(at)
		}
		if at != int64(cv.rows) {
			return nil
		}
	}
	p.oneRow = nf == cv.rows
	for f := 0; p.oneRow && f < nf; f++ {
		p.oneRow = p.bounds[f+1] == int32(f+1)
	}
	if inv == nil {
		return p
	}
	p.owner = make([]int64, nf)
	p.cont = make([]contEntry, nf)
	for f := range p.cont {
		p.cont[f].in = contNone
		p.cont[f].row.Store(contRowUnknown)
	}
	var buf [96]byte
	self := key.appendTo(buf[:0])
	ci := inv.chunks[string(self)]
	for f := range nf {
		p.owner[f] = -1
		if ci == nil {
			continue
		}
		e, ok := slices.BinarySearch(ci.frags, int64(f))
		if !ok {
			continue
		}
		p.owner[f] = ci.owner[e]
		nx, k := ci.next[e], ci.nextIn[e]
		if k < 0 || ci.nextKey[k] < 0 || nx.frag < 0 || nx.frag > math.MaxInt32 {
			continue // a fragment number past int32 names none the chunk has
		}
		p.cont[f].in, p.cont[f].frag = ci.nextKey[k], int32(nx.frag)
		if nx.ks == string(self) {
			p.cont[f].in = contSelf
		}
	}
	p.ids = make([]byte, 8*cv.rows)
	for f, id := range p.owner {
		for o := 8 * int(p.bounds[f]); o < 8*int(p.bounds[f+1]); o += 8 {
			binary.LittleEndian.PutUint64(p.ids[o:], uint64(id))
		}
	}
	if inv.lines {
		p.buildEdges()
	}
	return p
}

// buildEdges fills p.edges and p.holes: what lineEdges gives a chunk the
// box covers and the page holds whole (the same steps, in chunk-local
// indices), every edge to another chunk left as a hole.
func (p *chunkPrep) buildEdges() {
	nf := len(p.bounds) - 1
	p.edges = make([]uint64, 0, p.bounds[nf]) // an edge a row at most: a run a fragment, then its continuation
	nh := 0
	for f := range p.cont {
		if p.cont[f].in >= 0 { // into another chunk
			nh++
		}
	}
	p.holes = make([]edgeHole, 0, nh) // sized as charged, not as append would grow it
	for f := range nf {
		s, e := p.bounds[f], p.bounds[f+1]
		if s >= p.bounds[nf] {
			break // lineEdges stops at the fragments after the last row
		}
		for a := s + 1; a < e; a++ {
			p.edges = append(p.edges, uint64(a-1)|uint64(a)<<32)
		}
		// lineEdges follows f's continuation from row e-1 when that row
		// is the chunk's (for an empty fragment, the last row before it).
		if e < 1 {
			continue
		}
		switch ce := &p.cont[f]; ce.in {
		case contNone:
		case contSelf:
			if g := int(ce.frag); g < nf && p.bounds[g+1] > p.bounds[g] {
				p.edges = append(p.edges, uint64(e-1)|uint64(p.bounds[g])<<32)
			}
		default:
			p.holes = append(p.holes, edgeHole{at: int32(len(p.edges)), f: int32(f)})
		}
	}
}

// wholeEdges is lineEdges in the wire's form for a chunk the box covers
// and the page holds whole: the prepared edges with the chunk's first
// answer index added to both ends, the continuations to other chunks
// followed at their holes.
func (p *chunkPrep) wholeEdges(o *lineOut, ai *answerIndex, c *rankedChunk) {
	o.w = slices.Grow(o.w, 8*(len(p.edges)+len(p.holes)))
	add := uint64(uint32(c.start)) * (1 | 1<<32) // indices fit uint32 (wire): no carry between the halves
	next, at := &ai.sc.next, 0
	for _, h := range p.holes {
		if int(h.at) > at {
			o.w = addEdges(o.w, p.edges[at:h.at], add)
		}
		at = int(h.at)
		p.continuation(o, ai, next, c, int(h.f), c.start+int64(p.bounds[h.f+1])-1)
	}
	o.w = addEdges(o.w, p.edges[at:], add)
}

// addEdges appends edges to w with add added to each.
func addEdges(w []byte, edges []uint64, add uint64) []byte {
	n := len(w)
	if cap(w)-n < 8*len(edges) { // wholeEdges made room: a test, not a call a hole
		w = slices.Grow(w, 8*len(edges))
	}
	w = w[:n+8*len(edges)]
	// dst shrinks by a pair a step: one bounds check a store, and the
	// loop's values stay in registers (indexing dst[8*i:] spilled two of
	// them to the stack: 22 instructions an edge, now 9).
	dst := w[n:]
	for _, e := range edges {
		if len(dst) < 8 {
			break // never: dst holds 8 bytes an edge
		}
		binary.LittleEndian.PutUint64(dst[:8], e+add)
		dst = dst[8:]
	}
	return w
}

// frag returns the fragment of row r, starting the search from f (rows
// are asked for in ascending order, mostly within one fragment).
func (p *chunkPrep) frag(r int32, f int) int {
	if r >= p.bounds[f] {
		// Most often r is in f or a fragment just after it.
		for k := f; k < min(f+4, len(p.bounds)-1); k++ {
			if r < p.bounds[k+1] {
				return k
			}
		}
	}
	// The largest f with bounds[f] <= r: a non-empty fragment (empty ones
	// before it share its start).
	i, _ := slices.BinarySearch(p.bounds, r+1)
	return i - 1
}

// ownerIDs fills ids with the owners of m's rows [first, last), a fill
// per fragment: of its rows when the box covers the chunk, else of its
// matching rows, which fr (fragRanks of m's rows) delimits.
func (p *chunkPrep) ownerIDs(ids []int64, m *chunkMatch, fr []int32, first, last int) []int64 {
	ids = slices.Grow(ids[:0], last-first)[:last-first]
	if first >= last {
		return ids
	}
	if m.all {
		for i, f := first, p.frag(int32(first), 0); i < last; f++ {
			e := min(int(p.bounds[f+1]), last)
			fill(ids[i-first:e-first], p.owner[f])
			i = e
		}
		return ids
	}
	// A cut chunk: a fill per fragment's matching rows too.
	for i, f := first, p.frag(m.rows[first], 0); i < last; f++ {
		e := min(int(fr[f+1]), last)
		fill(ids[i-first:e-first], p.owner[f])
		i = max(i, e)
	}
	return ids
}

// wireIDs is ownerIDs in the binary format's form, little-endian int64
// bytes: a slice of the prepared column when the box covers the chunk (no
// copy; read only), else its matching rows gathered into dst.
func (p *chunkPrep) wireIDs(dst []byte, m *chunkMatch, first, last int) []byte {
	if m.all {
		return p.ids[8*first : 8*last : 8*last]
	}
	return gather(dst[:0], p.ids, m.rows[first:last], 8)
}

// fill sets every element of s to v.
func fill(s []int64, v int64) {
	for i := range s {
		s[i] = v
	}
}

// lineOut collects a line answer's edges: as the binary format's
// little-endian uint32 pairs when wire (the query asked for them and
// every index of the answer fits), else as int64 pairs.
type lineOut struct {
	wire bool
	w    []byte
	e    []int64
}

// add appends the edge (a, b).
func (o *lineOut) add(a, b int64) {
	if o.wire {
		o.w = binary.LittleEndian.AppendUint64(o.w, uint64(uint32(a))|uint64(uint32(b))<<32)
		return
	}
	o.e = append(o.e, a, b)
}

// grow makes room for n more edges.
func (o *lineOut) grow(n int) {
	if o.wire {
		o.w = slices.Grow(o.w, 8*n)
	} else {
		o.e = slices.Grow(o.e, 2*n)
	}
}

// run appends the edges (a-1, a) for a in [a0, end): consecutive rows
// of one fragment.
func (o *lineOut) run(a0, end int64) {
	if a0 >= end {
		return
	}
	if !o.wire {
		for a := a0; a < end; a++ {
			o.e = append(o.e, a-1, a)
		}
		return
	}
	n := len(o.w)
	k := 8 * int(end-a0)
	o.w = slices.Grow(o.w, k)[:n+k]
	dst := o.w[n:]
	// The answer's indices fit uint32 (wire): each pair is one store.
	v := uint64(uint32(a0-1)) | uint64(uint32(a0))<<32
	const step = 1 | 1<<32
	for i := 0; i+8 <= len(dst); i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], v)
		v += step
	}
}

// lineEdges appends to o the edges of page chunk c — consecutive rows of
// a fragment, and a fragment's last row to the first of the fragment
// that continues it — whose later end lies in [from, to), in the order
// the full walk of polylineEdges gives them (fragment, then row: the
// same, as fragments are consecutive ranges). Only c's matching rows are
// visited; a chunk the box covers is walked a fragment at a time.
func (p *chunkPrep) lineEdges(o *lineOut, ai *answerIndex, c *rankedChunk) {
	from, to := ai.from, ai.to
	n := int64(c.count())
	lo, hi := max(0, from-c.start), min(n, to-c.start)
	if lo >= hi {
		return
	}
	if c.all && o.wire && p.edges != nil && lo == 0 && hi == n {
		p.wholeEdges(o, ai, c)
		return
	}
	// At most one edge ends at each row of [lo, hi), plus the
	// continuations (one a fragment).
	o.grow(int(hi - lo))
	bounds := p.bounds
	next := &ai.sc.next
	if c.all {
		// Row i is answer index c.start+i.
		for f := p.frag(int32(lo), 0); f < len(bounds)-1 && int64(bounds[f]) < hi; f++ {
			s, e := int64(bounds[f]), int64(bounds[f+1])
			o.run(c.start+max(s+1, lo), c.start+min(e, hi))
			if e-1 >= lo && e-1 < hi {
				p.continuation(o, ai, next, c, f, c.start+e-1)
			}
		}
		return
	}
	if 2*(len(bounds)-1) > len(c.rows) {
		// Fragments of a row or two (a coarse level's): fewer matching
		// rows than fragments to walk.
		p.cutEdgesByRow(o, ai, c, int(lo), int(hi))
		return
	}
	p.cutEdgesByFrag(o, ai, c, lo, hi)
}

// cutEdgesByFrag is lineEdges for cut chunk c's matching rows [lo, hi),
// a fragment at a time: f's matching rows are rows[fr[f]:fr[f+1]],
// joined where they are consecutive rows, and its last row continues
// when it is the fragment's last.
func (p *chunkPrep) cutEdgesByFrag(o *lineOut, ai *answerIndex, c *rankedChunk, lo, hi int64) {
	bounds := p.bounds
	next := &ai.sc.next
	rows := c.rows
	fr := c.fragRanks(ai.sc, bounds)
	if o.wire {
		// Each row ends at most one edge of its fragment and starts at
		// most one continuation: with room for both, each candidate
		// pair is stored and kept (n advanced) without a branch.
		o.w = slices.Grow(o.w, 16*int(hi-lo))
	}
	nf := len(bounds) - 1
	fr = fr[:nf+1]
	for f := p.frag(rows[lo], 0); f < nf; f++ {
		s, e := int64(fr[f]), int64(fr[f+1])
		if s >= hi {
			break
		}
		if e == s {
			// No matching row: most fragments of a chunk a coarse
			// level's box cuts (a row or two a fragment).
			continue
		}
		if o.wire {
			if i0, end := max(s+1, lo), min(e, hi); i0 < end {
				o.w = cutRun(o.w, rows[i0-1:end], uint32(c.start+i0-1))
			}
		} else {
			for i := max(s+1, lo); i < min(e, hi); i++ {
				if rows[i] == rows[i-1]+1 {
					o.e = append(o.e, c.start+i-1, c.start+i)
				}
			}
		}
		if e > s && e-1 >= lo && e-1 < hi && rows[e-1] == bounds[f+1]-1 {
			p.continuation(o, ai, next, c, f, c.start+e-1)
		}
	}
}

// cutEdgesByRow is lineEdges for cut chunk c's matching rows [lo, hi)
// one row at a time, the same edges in the same order: the edge from
// the row before when that matches and lies in the row's fragment, then,
// at a fragment's last row, its continuation. Fragments are consecutive
// ranges, so rows ascending are fragments ascending; no fragment ranks
// are made (an answer at a coarse level cuts most of its chunks, and
// making them was a walk of every fragment of each).
func (p *chunkPrep) cutEdgesByRow(o *lineOut, ai *answerIndex, c *rankedChunk, lo, hi int) {
	rows, bounds := c.rows, p.bounds
	next := &ai.sc.next
	if p.oneRow {
		// Row r is fragment r, whole: no edge within a fragment, and
		// every row is a fragment's last.
		for i := lo; i < hi; i++ {
			p.continuation(o, ai, next, c, int(rows[i]), c.start+int64(i))
		}
		return
	}
	nf := len(bounds) - 1
	f := p.frag(rows[lo], 0)
	for i := lo; i < hi; i++ {
		r := rows[i]
		for f < nf && bounds[f+1] <= r {
			f++
		}
		if f >= nf {
			return // past the last fragment: a row no fragment holds
		}
		if i > 0 && rows[i-1] == r-1 && r > bounds[f] {
			o.add(c.start+int64(i)-1, c.start+int64(i))
		}
		if r == bounds[f+1]-1 {
			p.continuation(o, ai, next, c, f, c.start+int64(i))
		}
	}
}

// cutRun appends to w (with room for them) the edges ending at rows[k],
// k ≥ 1, of a cut chunk's matching rows within one fragment (answer
// index a+k): one where rows[k-1] is the row before. Each pair is stored
// and kept (n advanced) without a branch, which rows match being random
// to the predictor. A leaf of its own, so that its loop's values stay in
// registers (in lineEdges' loop they were reloaded every row).
//
//go:noinline
func cutRun(w []byte, rows []int32, a uint32) []byte {
	if len(rows) < 2 {
		return w
	}
	n := len(w)
	w = w[:cap(w)]
	// The pair is carried (both halves stepped by one add) and the row
	// before kept in a register: one load a row, not two, and no pair
	// built from a.
	v := uint64(a) | uint64(a+1)<<32
	prev := rows[0]
	for _, r := range rows[1:] {
		if uint(n) > uint(len(w)-8) {
			break // never: the caller made room for a pair a row
		}
		binary.LittleEndian.PutUint64(w[n:n+8], v)
		v += 1 | 1<<32
		k := 0
		if r == prev+1 {
			k = 8
		}
		n += k
		prev = r
	}
	return w[:n]
}

// continuation appends the edge from fragment f's last row, answer index
// a, to the first row of the fragment that continues it (in c itself or
// in another chunk), when that row is in the answer before the page's
// end. The cases every answer meets — a continuation in c, or into a
// chunk the box covers or whose fragment ranks are known, at a row an
// earlier answer looked up — take a few loads here; the rest are
// nextRow's and nextIndex's.
func (p *chunkPrep) continuation(o *lineOut, ai *answerIndex, next *nextChunks, c *rankedChunk, f int, a int64) {
	if f >= len(p.cont) { // no inverse map: no continuations
		return
	}
	ce := &p.cont[f]
	g := int(ce.frag)
	var d *rankedChunk
	var row int32
	switch k := ce.in; {
	case k == contSelf:
		// Within the chunk (a fragment split at a cell's edge): its own
		// preparation says where g starts.
		if g >= len(p.bounds)-1 || p.bounds[g+1] <= p.bounds[g] {
			return
		}
		d, row = c, p.bounds[g]
	case k >= 0: // contNone is negative
		if d = next.of(k); d == nil {
			return
		}
		if row = ce.row.Load(); row == contRowUnknown {
			var b int64
			if row, b = ce.nextRow(d, g); row == contRowUnknown {
				if b >= 0 && b < ai.to {
					o.add(a, b)
				}
				return
			}
		}
		if row < 0 { // an empty fragment
			return
		}
	default:
		return
	}
	var b int64
	switch fr := d.fragRank; {
	case d.all:
		b = d.start + int64(row)
	case g < len(fr)-1:
		// A cut chunk ranked already: row's place among its matching
		// rows, if it is one.
		i := fr[g]
		if int(i) >= len(d.rows) || d.rows[i] != row {
			return
		}
		b = d.start + int64(i)
	default:
		b = d.nextIndex(ai.sc, g, row)
	}
	if b >= 0 && b < ai.to {
		o.add(a, b)
	}
}

// nextRow looks up, for a continuation into chunk d's fragment g, the
// first row of g (-1 when g is empty) in d's preparation and keeps it in
// ce for later answers. Without a preparation it returns contRowUnknown
// and b, the answer index of g's first row from d's index (-1: none).
func (ce *contEntry) nextRow(d *rankedChunk, g int) (row int32, b int64) {
	if bounds := d.lineBounds(); bounds != nil {
		row = -1
		if g < len(bounds)-1 && bounds[g+1] > bounds[g] {
			row = bounds[g]
		}
		ce.row.Store(row)
		return row, -1
	}
	if r, ok := fragFirst(d.cv, g); ok {
		return contRowUnknown, d.at(r)
	}
	return contRowUnknown, -1
}

// nextIndex returns the answer index of row, the first of fragment g of
// cut chunk d, -1 when it is not a matching row: from d's fragment ranks
// (made now), or, when this answer holds d without a preparation, its
// index.
func (d *rankedChunk) nextIndex(sc *bboxScratch, g int, row int32) int64 {
	if d.prep != nil && d.prep.oneRow {
		// A row a fragment (a coarse level's chunk, a few matching
		// rows): a search of them, not ranks of every fragment.
		if i, ok := slices.BinarySearch(d.rows, row); ok {
			return d.start + int64(i)
		}
		return -1
	}
	if bounds := d.lineBounds(); g < len(bounds)-1 {
		if i := d.fragRanks(sc, bounds)[g]; int(i) < len(d.rows) && d.rows[i] == row {
			return d.start + int64(i)
		}
		return -1
	}
	return d.at(int64(row))
}

// fragRanks returns c's fragment ranks (see fragRanks), learnt on the
// first call (or when the batch's ids did, handed over by ranked), so a
// continuation into c costs a look-up, not a search.
func (c *rankedChunk) fragRanks(sc *bboxScratch, bounds []int32) []int32 {
	if c.fragRank == nil {
		c.fragRank = fragRanks(sc, bounds, c.rows)
	}
	return c.fragRank
}

// fragRanks returns, for each fragment f of bounds (and one past the
// last), the rank among rows (a cut chunk's matching rows, ascending) of
// the first at or after f's first row: f's matching rows are
// rows[fr[f]:fr[f+1]]. Kept in sc's arena until the query ends; with it
// ids, edges and continuations into the chunk work a fragment at a time,
// not a row at a time.
func fragRanks(sc *bboxScratch, bounds, rows []int32) []int32 {
	at, k := len(sc.rowArena), len(bounds)
	sc.rowArena = slices.Grow(sc.rowArena, k)[:at+k]
	fr := sc.rowArena[at : at+k : at+k]
	// One walk of both lists. (Tried: a branch-free merge, one step a
	// row or fragment, is a chain of dependent loads; a branch-free
	// binary search a fragment reads the rows out of order: both took
	// more of a streamline answer's CPU than this walk, whose one
	// mispredicted branch a fragment is cheaper.)
	i := 0
	for f, b := range bounds {
		for i < len(rows) && rows[i] < b {
			i++
		}
		fr[f] = int32(i)
	}
	return fr
}

// nextChunks finds the chunks continuations lie in by their key index:
// keyPos maps the level's key indices to the answer's candidate
// positions (-1: not a candidate) while an answer's edges are built, so
// a neighbour is found with a load, not a search of the candidates.
// Between answers every entry is -1: index sets only the candidates'
// entries and unindex resets them, so an answer pays for its candidates,
// not for the level's keys (but once).
type nextChunks struct {
	byPos  []*rankedChunk // the answer's ai.byPos, nil between answers
	keyPos []int32
}

// index fills keyPos for ai's candidates; unindex must follow.
func (n *nextChunks) index(ai *answerIndex) {
	n.byPos = ai.byPos
	if k := len(ai.l.keys); len(n.keyPos) < k {
		m := len(n.keyPos)
		n.keyPos = slices.Grow(n.keyPos, k-m)[:k]
		for i := m; i < k; i++ {
			n.keyPos[i] = -1
		}
	}
	for p, ki := range ai.cand {
		n.keyPos[ki] = int32(p)
	}
}

// unindex resets the entries index set.
func (n *nextChunks) unindex(ai *answerIndex) {
	for _, ki := range ai.cand {
		n.keyPos[ki] = -1
	}
	n.byPos = nil // the pooled scratch keeps no answer alive
}

// of returns the ranked chunk of the level's key index ki, nil when the
// answer index has none.
// Every continuation into another chunk asks: one compare for the
// range (a negative ki is a large uint), and none for an answer, as
// keyPos is all -1 between answers.
func (n *nextChunks) of(ki int32) *rankedChunk {
	if uint(ki) >= uint(len(n.keyPos)) {
		return nil
	}
	if p := n.keyPos[ki]; p >= 0 && int(p) < len(n.byPos) {
		return n.byPos[p]
	}
	return nil
}

// lineBounds returns the fragment bounds of c's preparation, nil when it
// has none (yet); looked up once per answer, however many continuations
// reach c.
func (c *rankedChunk) lineBounds() []int32 {
	if !c.boundsRead {
		if dp := c.cv.prep.Load(); dp != nil && dp.p != nil {
			c.bounds = dp.p.bounds
		}
		c.boundsRead = true
	}
	return c.bounds
}

// ChunkRows says which rows of a cached chunk a batch holds (Batch.Source),
// so that an encoder which turns a chunk's rows into the same bytes on
// every request (JSON's coordinate text) can make them once per cached
// chunk (Prepared) and copy them per answer.
type ChunkRows struct {
	l   *Level
	key Key
	cv  *chunkVerts
	// all: the batch holds the chunk's rows [first, first+n); else rows.
	all      bool
	first, n int
	rows     []int32
	// attrs: the batch's attribute columns, every row of the chunk.
	attrs []Column
}

// Span returns the chunk rows [lo, hi) the batch holds when they are
// consecutive (the box covers the chunk); ok is false otherwise, and
// Rows lists them.
func (s *ChunkRows) Span() (lo, hi int, ok bool) { return s.first, s.first + s.n, s.all }

// Rows returns the chunk rows the batch holds, ascending, when Span's are
// not consecutive (read only).
func (s *ChunkRows) Rows() []int32 { return s.rows }

// preparedRef remembers where a chunk's prepared value was last found, so
// a warm answer finds it with a pointer load instead of building and
// hashing its key. attr names the attribute (PreparedAttribute).
type preparedRef struct {
	name, attr string
	ref        *cache.Ref
}

// Prepared returns what build makes of the whole chunk's vertex column
// (every row), made at most once while it stays cached, and only when a
// second answer asks for it: a one-off answer (the query command, a cold
// box) would pay for every row of each chunk it cuts and keep memory it
// never uses again, so the first ask gets ok false. The value is kept in the
// store's cache under the chunk's key and name (name tells encoders'
// values apart; build must be a function of the column alone), and its
// size, build's second result, is charged to the cache's budget like any
// cached value, so it is evicted on its own when the budget is short and
// dropped with the store's version. ok is false when the store's cache
// cannot keep it (no cache, or one that hands out no refs): the caller
// then works from the batch's own rows.
func (s *ChunkRows) Prepared(ctx context.Context, name string, build func(vertices Column) (any, int64)) (any, bool) {
	l := s.l
	rc := l.s.refs
	if rc == nil || l.s.cache == nil {
		return nil, false
	}
	if p := s.cv.text.Load(); p != nil && p.name == name {
		if v, ok := rc.Deref(p.ref); ok {
			return v, true
		}
	}
	kind := "verts"
	if l.binPrefilter {
		kind = "vbins"
	}
	key := l.cacheKey(kind, s.key.String(), "prepared", name)
	if _, ok := l.s.cache.Peek(key); !ok && s.cv.asked.CompareAndSwap(false, true) {
		return nil, false
	}
	col := Column{Name: "vertices", DType: l.vdt.Name, typ: l.vdt, Channels: l.s.dims, Data: s.cv.data}
	v, ref, ok := s.prepare(ctx, key, col, build)
	if ref != nil {
		s.cv.text.Store(&preparedRef{name: name, ref: ref})
	}
	return v, ok
}

// PreparedAttribute is Prepared for the batch's attribute k (every row of
// the chunk), made once the chunk's vertices have a prepared value: an
// answer that wants one wants both, and the vertices' says a second
// answer asked.
func (s *ChunkRows) PreparedAttribute(ctx context.Context, k int, name string, build func(attribute Column) (any, int64)) (any, bool) {
	if s.l.s.refs == nil || s.l.s.cache == nil || k < 0 || k >= len(s.attrs) {
		return nil, false
	}
	if s.cv.text.Load() == nil {
		return nil, false
	}
	col := s.attrs[k]
	refs := s.cv.attrText.Load()
	if refs != nil {
		for _, p := range *refs {
			if p.attr == col.Name && p.name == name {
				if v, ok := s.l.s.refs.Deref(p.ref); ok {
					return v, true
				}
			}
		}
	}
	v, ref, ok := s.prepare(ctx, s.l.cacheKey("vertex_attributes/"+col.Name, s.key.String(), "prepared", name), col, build)
	if ref != nil {
		// A new list with this ref in place of any stale one for the
		// attribute; a concurrent store may lose it, to be found again.
		var next []preparedRef
		if refs != nil {
			for _, p := range *refs {
				if p.attr != col.Name || p.name != name {
					next = append(next, p)
				}
			}
		}
		next = append(next, preparedRef{name: name, attr: col.Name, ref: ref})
		s.cv.attrText.Store(&next)
	}
	return v, ok
}

// prepare returns the value cached under key, building it from col when
// it is not there, and a ref to it (nil when it did not stay cached).
func (s *ChunkRows) prepare(ctx context.Context, key string, col Column, build func(Column) (any, int64)) (any, *cache.Ref, bool) {
	rc := s.l.s.refs
	if v, ref, ok := rc.PeekRef(key); ok {
		return v, ref, true
	}
	v, err := s.l.cached(ctx, key, func(context.Context) (any, int64, error) {
		v, n := build(col)
		return v, n, nil
	})
	if err != nil {
		return nil, nil, false
	}
	_, ref, _ := rc.PeekRef(key) // nil when evicted at once (a budget too small): used this once
	return v, ref, true
}
