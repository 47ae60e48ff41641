package zvf

import "slices"

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
	// when the level has no objects); entry: its index in the chunk's
	// inverse entries, -1 when none.
	owner []int64
	entry []int32
}

// prepBytes is what a chunk's preparation may hold, counted with its
// vertices when they are cached (the preparation is built later, on the
// first bbox that needs it).
func prepBytes(cv *chunkVerts) int64 {
	nf := 1
	if cv.frags != nil {
		nf = cv.frags.Len()
	}
	return 64 + 16*int64(nf+1)
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
	if inv == nil {
		return p
	}
	p.owner = make([]int64, nf)
	p.entry = make([]int32, nf)
	ci := inv.of(key)
	for f := range nf {
		p.owner[f], p.entry[f] = -1, -1
		if ci == nil {
			continue
		}
		if e, ok := slices.BinarySearch(ci.frags, int64(f)); ok {
			p.owner[f], p.entry[f] = ci.owner[e], int32(e)
		}
	}
	return p
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

// ownerIDs fills ids with the owners of m's rows [first, last).
func (p *chunkPrep) ownerIDs(ids []int64, m *chunkMatch, first, last int) []int64 {
	ids = slices.Grow(ids[:0], last-first)[:last-first]
	f := 0
	for i := first; i < last; i++ {
		r := int32(m.row(i))
		f = p.frag(r, f)
		ids[i-first] = p.owner[f]
	}
	return ids
}

// lineEdges appends the edges of page chunk c — consecutive rows of a
// fragment, and a fragment's last row to the first of the fragment that
// continues it — whose later end lies in [from, to), in the order the
// full walk of polylineEdges gives them (fragment, then row: the same,
// as fragments are consecutive ranges). Only c's matching rows are
// visited.
func (p *chunkPrep) lineEdges(edges []int64, ai *answerIndex, c *rankedChunk, ci *chunkInverse) []int64 {
	from, to := ai.from, ai.to
	n := int64(c.count())
	lo, hi := max(0, from-c.start), min(n, to-c.start)
	f := 0
	row := func(i int64) int32 {
		if c.all {
			return int32(i)
		}
		return c.rows[i]
	}
	for i := lo; i < hi; i++ {
		r := row(i)
		a := c.start + i
		f = p.frag(r, f)
		if r > p.bounds[f] && i > 0 && row(i-1) == r-1 {
			edges = append(edges, a-1, a)
		}
		if r != p.bounds[f+1]-1 || ci == nil || p.entry == nil || p.entry[f] < 0 {
			continue
		}
		nx := ci.next[p.entry[f]]
		if nx.ks == "" {
			continue
		}
		d := ai.chunk(nx.ks)
		if d == nil {
			continue
		}
		if r2, ok := fragFirst(d.cv, int(nx.frag)); ok {
			if b := d.at(r2); b >= 0 && b < to {
				edges = append(edges, a, b)
			}
		}
	}
	return edges
}
