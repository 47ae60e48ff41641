package zvf

import (
	"context"
	"slices"
	"sync/atomic"

	"github.com/zvfserve/zvfserve/zvf/cql2"
)

// chunkSel is the rows of one chunk a filter is true for, whatever the
// box: evaluated once over the whole chunk and kept in the store's cache
// under the level, the filter's normal form and the chunk key (so one
// store version's selections serve only its own answers). Viewers ask the
// same filter for every tile and page of a view; with the selection
// cached, a repeat costs what an unfiltered answer of its rows costs.
type chunkSel struct {
	all  bool    // every row of the chunk
	rows []int32 // ascending (when !all)
	// verts holds the vertices of rows one after another, so a box that
	// covers the chunk slices them and one that cuts it tests only them;
	// nil when the selection keeps more than selVertsShare of the chunk
	// (a copy of most of the chunk would cost more memory than it saves).
	verts []byte
	// starts, with verts, when the chunk's fragments are its bins: bin
	// f's selected rows are at positions starts[f] … starts[f+1]-1, so a
	// box that cuts the chunk skips and takes whole bins as it does
	// unfiltered.
	starts []int32
}

// selVertsShare: a selection copies its rows' vertices when it keeps at
// most 1/selVertsShare of the chunk's rows.
const selVertsShare = 2

func (s *chunkSel) bytes() int64 {
	return 64 + 4*int64(cap(s.rows)+cap(s.starts)) + int64(cap(s.verts))
}

// selTable names the cached selections of one filter at one level: the
// key of chunk i's, built on first use, so a warm query builds no key
// string per chunk.
type selTable struct {
	prefix string
	keys   []atomic.Pointer[string]
}

// selTable returns the level's table for filter f, itself cached (the
// checked filter's text is its normal form: the text and JSON spellings
// of one filter share their selections).
func (l *Level) selTable(ctx context.Context, f *cql2.Filter) (*selTable, error) {
	prefix := l.cacheKey("sel", f.String(), "")
	v, err := l.cached(ctx, prefix, func(context.Context) (any, int64, error) {
		t := &selTable{prefix: prefix, keys: make([]atomic.Pointer[string], len(l.keys))}
		// Counted as if every chunk's key were built.
		return t, 64 + int64(len(l.keys))*int64(8+16+len(prefix)+24), nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*selTable), nil
}

// key returns the cache key of chunk i's selection.
func (t *selTable) key(l *Level, i int32) string {
	if k := t.keys[i].Load(); k != nil {
		return *k
	}
	k := string(l.keys[i].appendTo([]byte(t.prefix)))
	t.keys[i].Store(&k) // racing builders store equal keys
	return k
}

// peekSel returns chunk i's cached selection, if the cache holds it.
func (rf *rowFilter) peekSel(i int32) (*chunkSel, bool) {
	v, ok := rf.l.s.peek(rf.sels.key(rf.l, i))
	if !ok {
		return nil, false
	}
	return v.(*chunkSel), true
}

// selection returns chunk i's selection (its vertices cv), evaluating the
// filter over the whole chunk on a miss. The evaluation runs on the
// cache's loader, with an evaluator of its own (a caller may stop waiting
// while it runs).
func (rf *rowFilter) selection(ctx context.Context, i int32, cv *chunkVerts) (*chunkSel, error) {
	if s, ok := rf.peekSel(i); ok {
		return s, nil
	}
	l, key := rf.l, rf.l.keys[i]
	v, err := l.cached(ctx, rf.sels.key(l, i), func(ctx context.Context) (any, int64, error) {
		var owner []int64
		if rf.f.NeedsObjectIDs() {
			owner = l.chunkOwners(nil, key, cv, rf.inv)
		}
		ev := rf.evaluator()
		defer rf.release(ev)
		if err := rf.bind(ctx, ev, key, cv.rows, owner); err != nil {
			return nil, 0, err
		}
		rows, err := ev.SelectRange(nil, 0, cv.rows)
		if err != nil {
			return nil, 0, err
		}
		s := &chunkSel{rows: rows}
		switch {
		case len(rows) == cv.rows:
			s.all, s.rows = true, nil
		case len(rows)*selVertsShare <= cv.rows:
			s.rows = rows[:len(rows):len(rows)]
			if len(rows) > 0 {
				s.verts = gather(nil, cv.data, rows, l.vdt.Size*l.s.dims)
				s.verts = s.verts[:len(s.verts):len(s.verts)]
				if l.binsUsable(cv) {
					s.starts = selStarts(cv, rows, int(prod(l.bpc)))
				}
			}
		}
		return s, s.bytes(), nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*chunkSel), nil
}

// matchSelected finds the rows of chunk l.keys[i] (its vertices cv)
// inside [min, max] that the filter (from its cached selection) and the
// sample keep, into m: the selection's rows and vertices themselves
// where the box covers the chunk, else the selection's rows tested
// against the box.
func (rf *rowFilter) matchSelected(ctx context.Context, i int32, cv *chunkVerts, min, max []float64, m *chunkMatch) error {
	l := rf.l
	key := l.keys[i]
	sel, err := rf.selection(ctx, i, cv)
	if err != nil {
		return err
	}
	if sel.all {
		l.matchVerts(key, cv, min, max, m)
	} else {
		buf := m.buf[:0]
		*m = chunkMatch{key: key, cv: cv, owner: m.owner[:0], buf: buf, rows: buf, pbuf: m.pbuf}
		switch {
		case len(sel.rows) == 0:
		case cv.inCell && l.covers(key, min, max):
			m.rows, m.vdata = sel.rows, sel.verts
		case sel.verts != nil:
			// Only the selected rows are tested, bin by bin where the
			// chunk has bins: positions in the selection, whose vertices
			// the answer gathers, and the chunk's rows at them.
			var pos []int32
			if sel.starts != nil {
				pos = l.matchBins(m.pbuf[:0], cv, key, min, max, sel.verts, sel.starts)
			} else {
				pos = appendMatches(m.pbuf[:0], sel.verts, l.vdt, l.s.dims, 0, len(sel.rows), min, max)
			}
			rows := slices.Grow(buf, len(pos))[:len(pos)]
			for k, j := range pos {
				rows[k] = sel.rows[j]
			}
			m.rows, m.buf, m.pbuf = rows, rows, pos
			m.vdata, m.vpos = sel.verts, pos
		default:
			l.matchVerts(key, cv, min, max, m)
			if m.all {
				m.all, m.rows = false, sel.rows
			} else {
				m.rows = intersectRows(m.rows, sel.rows)
				m.buf = m.rows
			}
		}
	}
	if rf.owners {
		m.owner = l.chunkOwners(m.owner[:0], key, cv, rf.inv)
		m.owned = true
	}
	if rf.sample {
		rf.sampleMatch(m)
	}
	return nil
}

// intersectRows keeps the rows of a (ascending) that b (ascending) holds,
// in place.
func intersectRows(a, b []int32) []int32 {
	out := a[:0]
	j := 0
	for _, r := range a {
		for j < len(b) && b[j] < r {
			j++
		}
		if j == len(b) {
			break
		}
		if b[j] == r {
			out = append(out, r)
		}
	}
	return out
}

// selStarts returns where each of the n bins' selected rows start among
// rows (the selection's, ascending), and their end last; nil unless the
// bins' rows are consecutive ranges in bin order (what writers produce).
func selStarts(cv *chunkVerts, rows []int32, n int) []int32 {
	starts := make([]int32, n+1)
	j, at := 0, int64(0)
	for f := range n {
		starts[f] = int32(j)
		s, c := cv.binRange(f)
		if c > 0 && s != at {
			return nil
		}
		at += c
		for j < len(rows) && int64(rows[j]) < at {
			j++
		}
	}
	if at != int64(cv.rows) {
		return nil
	}
	starts[n] = int32(j)
	return starts
}
