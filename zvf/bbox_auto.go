package zvf

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ChooseLevel returns the finest level whose vertex count inside the box
// is at most budget, or the coarsest level when none fits, among the levels
// that hold every attribute named in attrs ("*" or none: any level) and
// on which sel's filter is valid (every property it names there, with the
// channels it gives them). A sample counts its share of the
// estimate (a filter's share is not known before reading).
//
// It reads nothing: a level's count is estimated from its metadata (its
// vertex count spread evenly over its non-empty chunks, times the share of
// each chunk's cell the box covers), and counted exactly from chunks read
// before (see fitsInBox). The answer itself is still limited to budget and
// paged, so an estimate off by a factor costs a page, not correctness.
func (s *Store) ChooseLevel(ctx context.Context, min, max []float64, budget int64, attrs []string, sel Selection) (int, error) {
	return s.ChooseLevelWith(ctx, min, max, budget, attrs, nil, sel)
}

// ChooseLevelWith is ChooseLevel among the levels that also hold every
// link attribute named in linkAttrs (nil or "*": any level): an answer
// asking for edge values needs a level that keeps them, and coarse
// levels keep none.
func (s *Store) ChooseLevelWith(ctx context.Context, min, max []float64, budget int64, attrs, linkAttrs []string, sel Selection) (int, error) {
	levels := make([]*Level, 0, len(s.levels))
	var lacks error
	for _, l := range s.levels {
		if err := l.checkBox(min, max); err != nil {
			return 0, err
		}
		if _, err := l.selectAttrs(attrs); err != nil {
			continue
		}
		if _, err := l.selectLinkAttrs(linkAttrs); errors.Is(err, ErrUnsupported) {
			return 0, err // the level has it, of a type never served
		} else if err != nil {
			continue
		}
		if sel.Filter != nil {
			// Valid here, not only naming properties the level has: a
			// property may have one channel on one level and several on
			// another (the queryables list NAME there, NAME[i] here).
			if _, err := l.CompileFilter(sel.Filter); err != nil {
				if lacks == nil {
					lacks = err
				}
				continue
			}
		}
		levels = append(levels, l)
	}
	if len(levels) == 0 {
		if lacks != nil {
			return 0, lacks
		}
		return 0, s.errf(ErrNotFound, -1, "", "", "no level holds %s", unheld(attrs, linkAttrs))
	}
	share := 1.0
	if sel.Sample > 0 && sel.Sample < 1 {
		share = sel.Sample
	}
	sc := s.getScratch()
	defer s.putScratch(sc)
	for _, l := range levels[:len(levels)-1] {
		if l.fitsInBox(sc, min, max, float64(budget)/share) {
			return l.n, nil
		}
	}
	return levels[len(levels)-1].n, nil
}

// chunkSeen packs what a chunk's decoded vertices say for counting:
// rows<<2 | inCell<<1 | 1, so 0 means not seen. A level belongs to one
// version of its store, so this stays true after the chunk leaves the
// cache.
func chunkSeen(cv *chunkVerts) uint64 {
	v := uint64(cv.rows)<<2 | 1
	if cv.inCell {
		v |= 2
	}
	return v
}

// noteSeen records a freshly decoded chunk for level=auto, so that the
// warm path finds its count without a cache lookup.
func (l *Level) noteSeen(ks string, cv *chunkVerts) {
	if i, ok := l.keySet[ks]; ok {
		l.noteSeenAt(int32(i), chunkSeen(cv))
	}
}

// noteSeenAt records chunk i's seen value, counting a change in seenGen
// (a chunk's value changes once at most: from 0 to what its rows say).
func (l *Level) noteSeenAt(i int32, v uint64) {
	if old := l.seen[i].Swap(v); old != v {
		l.seenGen.Add(1)
		if old == 0 {
			l.listed.seenFirst(int64(v >> 2))
		}
	}
}

// fitsInBox reports whether the level's vertex count in the closed box,
// as far as what was read and the metadata tell, is at most stop.
//
// A chunk seen before (l.seen) whose cell the box covers and whose rows
// all lie in that cell counts its rows, exactly, without a cache lookup.
// A chunk never seen (so not cached) counts the level's mean vertices per
// chunk times the share of its cell inside the box. A seen chunk the box
// cuts is matched row by row only when the rest leaves the answer open
// (the rest alone passes stop, or the rest plus all its rows stays within
// it, decides without), and then from the cache, or as its rows times the
// share of its cell when it has been evicted. The level's seenSums give
// the pass's answer without the pass whenever it needs no cut chunk
// matched and, with chunks never seen, whenever those the box covers
// already pass stop (unseenPass): warm, a request costs a few table reads
// per level.
func (l *Level) fitsInBox(sc *bboxScratch, lo, hi []float64, stop float64) bool {
	if len(l.keys) == 0 {
		return 0 <= stop
	}
	if fits, decided := l.fitsFromSums(lo, hi, stop); decided {
		return fits
	}
	return l.fitsByPass(sc, lo, hi, stop)
}

// fitsByPass is fitsInBox by a pass over the box's candidate chunks.
func (l *Level) fitsByPass(sc *bboxScratch, lo, hi []float64, stop float64) bool {
	mean := float64(l.meta.VertexCount) / float64(len(l.keys))
	sc.choiceScans++
	sc.cand = l.candidates(sc.cand[:0], lo, hi)
	edges := sc.cand[:0] // the cut chunks, compacted in place
	est, cut := 0.0, 0.0
	hits := 0
	defer func() { l.s.countHits(hits) }()
	for _, i := range sc.cand {
		// A chunk not seen is not cached: the load that caches one notes
		// it first (loadVertices), and seen never forgets.
		seen := l.seen[i].Load()
		switch {
		case seen == 0:
			frac := l.cellShare(i, lo, hi)
			est += frac * mean
		case seen&2 != 0 && l.covers(l.keys[i], lo, hi):
			est += float64(seen >> 2)
		default:
			cut += float64(seen >> 2)
			edges = append(edges, i)
		}
		if est > stop {
			return false
		}
	}
	if est+cut <= stop {
		return true
	}
	var m chunkMatch
	for _, i := range edges {
		if v, ok := l.peekVertsTally(i, &hits); ok {
			l.matchVerts(l.keys[i], v.(*chunkVerts), lo, hi, &m)
			est += float64(m.count())
		} else {
			frac := l.cellShare(i, lo, hi)
			est += frac * float64(l.seen[i].Load()>>2)
		}
		if est > stop {
			return false
		}
	}
	return true
}

// cellShare is the share of chunk l.keys[i]'s cell inside the box.
func (l *Level) cellShare(i int32, lo, hi []float64) float64 {
	d, off := l.s.dims, l.keyArity-l.s.dims
	frac := 1.0
	for a := 0; a < d; a++ {
		cs := l.chunkShape[a]
		c := float64(l.keys[i][off+a]) * cs
		frac *= max(0, min(hi[a], c+cs)-max(lo[a], c)) / cs // the builtins: math.Min's rules, inlined
	}
	return frac
}

// unheld names what ChooseLevelWith found no level holding: the vertex
// attributes, the link attributes, or both together (never an empty list).
func unheld(attrs, linkAttrs []string) string {
	var what []string
	for _, a := range []struct {
		kind  string
		names []string
	}{{"vertex", attrs}, {"link", linkAttrs}} {
		switch len(a.names) {
		case 0:
		case 1:
			what = append(what, fmt.Sprintf("%s attribute %q", a.kind, a.names[0]))
		default:
			what = append(what, fmt.Sprintf("%s attributes %q", a.kind, strings.Join(a.names, ",")))
		}
	}
	if len(what) == 2 {
		return what[0] + " and " + what[1] + " together"
	}
	return strings.Join(what, "")
}
