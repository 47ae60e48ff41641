package zvf

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// A paged bbox answer is one sequence of rows — the box's candidate
// chunks in key order, each chunk's matching rows in row order — cut into
// pages wherever the caller stops a page (its limit, or any other bound).
// Edge and face indices are positions in that whole sequence, and each
// connection travels in the page that holds its last vertex (the largest
// index): every one of its vertices has then reached the client. A page
// therefore needs the position of earlier rows its connections reach
// back to. Resume carries what makes that cheap: where the page starts
// (a chunk and a rank in it, so nothing before is matched again) and the
// matching-row counts of the chunks just before it, from which the start
// of any of them follows by subtraction. A reach-back further than those
// counts is still answered exactly, by matching the chunks in between.

// Resume is where a page of a bbox answer starts, from the previous
// page's BBoxResult.Next. It travels inside a paging cursor (Append,
// ParseResume) and is only valid for the same store revision, level and
// box.
type Resume struct {
	// Offset is the number of rows of the answer before the page.
	Offset int64
	chunk  int     // the page's first chunk: its place among the box's candidate chunks
	rank   int     // the page's first row: its place among that chunk's matching rows
	back   []int64 // matching rows of the candidate chunks before chunk, nearest first
}

// resumeFormat versions Resume's encoding.
const resumeFormat = 1

// Bounds a parsed Resume must respect (a cursor comes from a client).
const (
	maxResumeOffset = 1 << 56
	maxResumeChunk  = 1 << 31
	maxResumeCount  = 1 << 40
)

// Append appends r's encoding to dst, at most maxBytes of it: the counts
// of the chunks before the page that do not fit are left out (the oldest
// first), and a later page that reaches back to them matches the chunks
// in between instead.
func (r *Resume) Append(dst []byte, maxBytes int) []byte {
	start := len(dst)
	dst = binary.AppendUvarint(dst, resumeFormat)
	dst = binary.AppendUvarint(dst, uint64(r.Offset))
	dst = binary.AppendUvarint(dst, uint64(r.chunk))
	dst = binary.AppendUvarint(dst, uint64(r.rank))
	room := maxBytes - (len(dst) - start)
	n, used := 0, 0
	for _, c := range r.back {
		w := uvarintLen(uint64(c))
		if used+w+uvarintLen(uint64(n+1)) > room {
			break
		}
		used += w
		n++
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	for _, c := range r.back[:n] {
		dst = binary.AppendUvarint(dst, uint64(c))
	}
	return dst
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// errResume is what every malformed Resume encoding matches.
var errResume = errors.New("not a page position")

// ParseResume decodes what Append wrote. Anything else is an error
// (matching ErrBadQuery): every number is bounded, the counts are no more
// than the bytes that hold them, and they fit in the rows before the page.
func ParseResume(b []byte) (*Resume, error) {
	bad := func(what string) (*Resume, error) {
		return nil, fmt.Errorf("%w: %w: %s", ErrBadQuery, errResume, what)
	}
	next := func(limit uint64) (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 || v > limit || n != uvarintLen(v) { // one encoding per position: no padded varints
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	if f, ok := next(resumeFormat); !ok || f != resumeFormat {
		return bad("unknown format")
	}
	off, ok1 := next(maxResumeOffset)
	chunk, ok2 := next(maxResumeChunk)
	rank, ok3 := next(maxResumeChunk)
	n, ok4 := next(uint64(len(b)))
	if !ok1 || !ok2 || !ok3 || !ok4 || n > uint64(len(b)) { // every count takes a byte at least
		return bad("truncated or out of range")
	}
	r := &Resume{Offset: int64(off), chunk: int(chunk), rank: int(rank), back: make([]int64, 0, n)}
	sum := int64(r.rank)
	for range n {
		c, ok := next(maxResumeCount)
		if !ok {
			return bad("truncated count")
		}
		sum += int64(c)
		if sum > r.Offset {
			return bad("counts exceed the rows before the page")
		}
		r.back = append(r.back, int64(c))
	}
	if len(b) != 0 || int64(r.rank) > r.Offset {
		return bad("trailing bytes or rank past the offset")
	}
	return r, nil
}

// rankedChunk is a chunk of the answer as connectivity sees it: where its
// first matching row sits in the whole answer, and which rows match. It
// costs what the chunk gives the answer: a chunk the box covers keeps no
// row list, a cut one a copy of its matching rows; the per-row rank table
// is built only for the connectivity that walks whole chunks (dense).
type rankedChunk struct {
	key   Key
	cv    *chunkVerts
	pos   int     // place among the box's candidate chunks
	start int64   // answer index of the chunk's first matching row
	all   bool    // every row matches
	rows  []int32 // matching rows, ascending (when !all)
	ranks []int32 // per chunk row: rank among the matching rows + 1, 0 outside; nil until dense
	// fragRank: per fragment, the rank of its first row among the
	// matching rows (or of the next matching row); nil until fragRanks.
	fragRank []int32
	// bounds: the fragment bounds of cv's preparation, nil when none;
	// read once an answer (lineBounds).
	bounds     []int32
	boundsRead bool
	// prep: cv's preparation when ranked found one (nil: none yet, or
	// none possible), so the answer's edges need not load it again from
	// the chunk (two loads of cold memory a chunk).
	prep *chunkPrep
}

// rankedBlock is how many ranked chunks a block of the scratch holds.
const rankedBlock = 64

// ranked keeps what at needs of m (whose row list is scratch), in sc's
// memory: blocks of ranked chunks and one arena of their rows, reused by
// the next query, so connectivity allocates nothing per chunk.
func (sc *bboxScratch) ranked(m *chunkMatch, pos int, start int64) *rankedChunk {
	b, i := sc.rcUsed/rankedBlock, sc.rcUsed%rankedBlock
	if b == len(sc.rcs) {
		sc.rcs = append(sc.rcs, make([]rankedChunk, rankedBlock))
	}
	sc.rcUsed++
	// Zero until now: putScratch clears what a query used (one clear a
	// block), so only the fields known here are stored, not the whole
	// struct (a struct's store a chunk was 3 % of a coarse level's answer).
	rc := &sc.rcs[b][i]
	rc.key, rc.cv, rc.pos, rc.start, rc.all = m.key, m.cv, pos, start, m.all
	if !m.all {
		// A grown arena leaves the rows of earlier chunks where they
		// were: still theirs until the query ends.
		n := len(sc.rowArena)
		sc.rowArena = append(sc.rowArena, m.rows...)
		rc.rows = sc.rowArena[n:len(sc.rowArena):len(sc.rowArena)]
	}
	// The fragment ranks fillBatch made of m's rows, if it made any just
	// before; taken, so that no later chunk takes them.
	if !m.all {
		rc.fragRank = sc.fr
	}
	sc.fr = nil
	// The preparation's bounds, while m's chunk is in cache: a
	// continuation into it then reads them from the ranked chunk it
	// loads anyway (lineBounds).
	if dp := m.cv.prep.Load(); dp != nil && dp.p != nil {
		rc.bounds, rc.boundsRead, rc.prep = dp.p.bounds, true, dp.p
	}
	return rc
}

// count is the chunk's matching rows.
func (c *rankedChunk) count() int {
	if c.all {
		return c.cv.rows
	}
	return len(c.rows)
}

// at returns the answer index of chunk row r, or -1 when r is not in the
// answer.
func (c *rankedChunk) at(r int64) int64 {
	if r < 0 || r >= int64(c.cv.rows) {
		return -1
	}
	if c.all {
		return c.start + r
	}
	if c.ranks != nil {
		if c.ranks[r] == 0 {
			return -1
		}
		return c.start + int64(c.ranks[r]) - 1
	}
	i, ok := slices.BinarySearch(c.rows, int32(r))
	if !ok {
		return -1
	}
	return c.start + int64(i)
}

// dense readies c for lookups of most of its rows (a walk of every row
// or link of the chunk): a rank table instead of a search each.
func (c *rankedChunk) dense() {
	if c.all || c.ranks != nil {
		return
	}
	c.ranks = make([]int32, c.cv.rows)
	for i, r := range c.rows {
		c.ranks[r] = int32(i + 1)
	}
}

// answerIndex is what one page knows of the whole answer's row order: the
// chunks it emitted, the counts of the candidate chunks before it (from
// the cursor or its own skipping) and, on demand, earlier chunks its
// connections reach back to (matched again) and later ones whose
// emptiness decides which link cells the whole answer reads.
type answerIndex struct {
	l        *Level
	sc       *bboxScratch
	min, max []float64
	cand     []int32
	from, to int64 // the page: answer indices [from, to)
	// paged: the answer has rows outside [from, to).
	paged bool
	// ps is the candidate position of the page's first chunk, startPS the
	// answer index of that chunk's first matching row; before holds the
	// counts of positions ps-1, ps-2, … and sums their running totals
	// (sums[i] = before[0] + … + before[i-1]).
	ps      int
	startPS int64
	before  []int64
	sums    []int64
	// seen holds the counts of the positions the page matched, from
	// seenLo on (ps and after, and in offset mode everything skipped).
	seenLo int
	seen   []int64
	// byPos holds, by candidate position, the page's chunks and the
	// earlier ones resolved (nil elsewhere; nil slice without
	// connectivity): found by position, no string map per query.
	byPos []*rankedChunk
	page  []*rankedChunk // the page's chunks, in order
	later map[int]int64  // counts of positions after the page, matched for link sources
}

// position returns key's place among the candidate chunks, or -1.
func (ai *answerIndex) position(ks string) int {
	i, ok := ai.l.keySet[ks]
	if !ok {
		return -1
	}
	p, found := slices.BinarySearch(ai.cand, int32(i))
	if !found {
		return -1
	}
	return p
}

// count returns the matching rows of candidate position p when known.
func (ai *answerIndex) count(p int) (int64, bool) {
	if p >= ai.seenLo && p < ai.seenLo+len(ai.seen) {
		return ai.seen[p-ai.seenLo], true
	}
	if p < ai.ps && ai.ps-p <= len(ai.before) {
		return ai.before[ai.ps-p-1], true
	}
	c, ok := ai.later[p]
	return c, ok
}

// pageEnd is the last candidate position the page matched.
func (ai *answerIndex) pageEnd() int { return ai.seenLo + len(ai.seen) - 1 }

// chunk returns the ranked chunk of ks when the page emitted it or it was
// resolved.
func (ai *answerIndex) chunk(ks string) *rankedChunk {
	if p := ai.position(ks); p >= 0 {
		return ai.byPos[p]
	}
	return nil
}

// chunkAt is chunk for the level's key index ki (-1: none).
func (ai *answerIndex) chunkAt(ki int32) *rankedChunk {
	if ki < 0 {
		return nil
	}
	if p, ok := slices.BinarySearch(ai.cand, ki); ok {
		return ai.byPos[p]
	}
	return nil
}

// add makes rc available through chunk.
func (ai *answerIndex) add(rc *rankedChunk) { ai.byPos[rc.pos] = rc }

// resolve makes every chunk of earlier that lies before the page's first
// chunk available through chunk, and learns the count of every chunk of
// later that lies after the page (whether it holds rows is all a page
// needs of those). Chunks are matched concurrently as for the answer; so
// are the ones between the farthest earlier chunk and the counts the page
// already knows.
func (ai *answerIndex) resolve(ctx context.Context, earlier, later []string) error {
	want := map[int]string{} // positions whose ranks are wanted
	var counts []int         // positions whose counts alone are wanted
	lowest := ai.ps
	for _, ks := range earlier {
		if p := ai.position(ks); p >= 0 && p < ai.ps && ai.byPos[p] == nil {
			want[p] = ks
			lowest = min(lowest, p)
		}
	}
	for _, ks := range later {
		if p := ai.position(ks); p > ai.pageEnd() {
			if _, ok := ai.later[p]; !ok {
				counts = append(counts, p)
			}
		}
	}
	if len(want) == 0 && len(counts) == 0 {
		return nil
	}
	gapHi := ai.ps - len(ai.before) // positions [lowest, gapHi) have no count yet
	var ps []int
	for p := lowest; p < gapHi; p++ {
		ps = append(ps, p)
	}
	for p := range want {
		if p >= gapHi {
			ps = append(ps, p)
		}
	}
	ps = append(ps, counts...)
	slices.Sort(ps)
	ps = slices.Compact(ps)
	sub := make([]int32, len(ps))
	for i, p := range ps {
		sub[i] = ai.cand[p]
	}
	got := make(map[int]int64, len(ps))
	ranked := make([]*rankedChunk, 0, len(want))
	i := 0
	err := ai.l.matches(ctx, ai.sc, sub, ai.min, ai.max, func(m *chunkMatch) (bool, error) {
		p := ps[i]
		i++
		got[p] = int64(m.count())
		if _, ok := want[p]; ok {
			ranked = append(ranked, ai.sc.ranked(m, p, 0))
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	for p := gapHi - 1; p >= lowest; p-- {
		ai.before = append(ai.before, got[p])
	}
	if len(ai.sums) == 0 {
		ai.sums = append(ai.sums, 0)
	}
	for k := len(ai.sums); k <= len(ai.before); k++ {
		ai.sums = append(ai.sums, ai.sums[k-1]+ai.before[k-1])
	}
	for _, rc := range ranked {
		rc.start = ai.startPS - ai.sums[ai.ps-rc.pos]
		if rc.start < 0 {
			return ai.l.s.errf(ErrBadQuery, ai.l.n, "", "", "cursor does not fit this answer")
		}
		ai.add(rc)
	}
	for _, p := range counts {
		if ai.later == nil {
			ai.later = map[int]int64{}
		}
		ai.later[p] = got[p]
	}
	return nil
}

// emittedInAnswer reports whether the chunk at candidate position p holds
// rows of the whole answer (all pages), from the counts resolve learnt.
func (ai *answerIndex) emittedInAnswer(p int) bool {
	c, ok := ai.count(p)
	return ok && c > 0
}

// setBefore notes the row counts of the chunks before the page's first
// (from chunk p0 back, then the earlier pages' back): connectivity numbers
// the page's rows after them.
func (ai *answerIndex) setBefore(p0 int, back []int64) {
	if ai.ps < 0 {
		return
	}
	ai.before = make([]int64, 0, ai.ps-p0+len(back))
	for p := ai.ps - 1; p >= p0; p-- {
		ai.before = append(ai.before, ai.seen[p-p0])
	}
	ai.before = append(ai.before, back...)
}
