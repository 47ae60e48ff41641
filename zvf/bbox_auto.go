package zvf

import (
	"context"
	"math"
	"strings"
)

// ChooseLevel returns the finest level whose vertex count inside the box
// is at most budget, or the coarsest level when none fits, among the levels
// that hold every attribute named in attrs ("*" or none: any level) and
// every property sel's filter names. A sample counts its share of the
// estimate (a filter's share is not known before reading).
//
// It reads nothing: a level's count is estimated from its metadata (its
// vertex count spread evenly over its non-empty chunks, times the share of
// each chunk's cell the box covers), and counted exactly only from chunks
// already in the cache. The answer itself is still limited to budget and
// paged, so an estimate off by a factor costs a page, not correctness.
func (s *Store) ChooseLevel(ctx context.Context, min, max []float64, budget int64, attrs []string, sel Selection) (int, error) {
	levels := make([]*Level, 0, len(s.levels))
	var lacks error
	for _, l := range s.levels {
		if err := l.checkBox(min, max); err != nil {
			return 0, err
		}
		if _, err := l.selectAttrs(attrs); err != nil {
			continue
		}
		if sel.Filter != nil {
			if miss := l.missing(sel.Filter); len(miss) > 0 {
				if lacks == nil {
					lacks = l.s.errf(ErrBadQuery, l.n, "", "", "%w", l.missingError(l.schemaRef(), miss[0]))
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
		return 0, s.errf(ErrNotFound, -1, "", "", "no level holds every attribute of %q", strings.Join(attrs, ","))
	}
	share := 1.0
	if sel.Sample > 0 && sel.Sample < 1 {
		share = sel.Sample
	}
	sc := s.getScratch()
	defer s.putScratch(sc)
	for _, l := range levels[:len(levels)-1] {
		stop := float64(budget) / share
		if l.estimateInBox(sc, min, max, stop) <= stop {
			return l.n, nil
		}
	}
	return levels[len(levels)-1].n, nil
}

// estimateInBox is the level's vertex count in the closed box as far as
// the metadata and the cache tell: cached chunks are matched exactly, the
// others count their share of the level's mean vertices per chunk by the
// fraction of their cell inside the box. Once the count passes stop it
// is returned as it stands: every chunk adds, so the level cannot fit,
// and a large box at a fine level is not matched row by row to learn it.
func (l *Level) estimateInBox(sc *bboxScratch, lo, hi []float64, stop float64) float64 {
	if len(l.keys) == 0 {
		return 0
	}
	mean := float64(l.meta.VertexCount) / float64(len(l.keys))
	d, off := l.s.dims, l.keyArity-l.s.dims
	sc.cand = l.candidates(sc.cand[:0], lo, hi)
	var m chunkMatch
	est := 0.0
	for _, i := range sc.cand {
		if v, ok := l.s.peek(l.vkeys[i]); ok {
			m.rows = m.rows[:0]
			l.matchVerts(l.keys[i], v.(*chunkVerts), lo, hi, &m)
			est += float64(m.count())
			if est > stop {
				return est
			}
			continue
		}
		frac := 1.0
		for a := 0; a < d; a++ {
			cs := l.chunkShape[a]
			c := float64(l.keys[i][off+a]) * cs
			frac *= max(0, math.Min(hi[a], c+cs)-math.Max(lo[a], c)) / cs
		}
		est += frac * mean
		if est > stop {
			return est
		}
	}
	return est
}
