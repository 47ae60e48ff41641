package zvf

import (
	"context"
	"math"
	"strings"
)

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
