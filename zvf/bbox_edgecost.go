package zvf

import (
	"context"
	"slices"
)

// edgeCosts is, for each matching row of chunk m (candidate position
// pos) in answer order, the bytes of stored link attribute values (of
// sel) of the edges that row carries: those whose later vertex in the
// answer it is (a page carries an edge with its last vertex,
// BBoxResult.Edges). An intra-chunk link is counted at its later row
// when both rows match; a cross-chunk link with stored values (ZVF 0.9
// keeps them; 0.7 keeps none) at its row here when its other end is in
// a chunk earlier in the answer, matched or not: an upper bound, so a
// page is never more than its budget. costs[:m.count()] is the answer;
// costs and rank are scratch, returned grown.
func (l *Level) edgeCosts(ctx context.Context, costs []int64, rank []int32, ai *answerIndex, m *chunkMatch, pos int, sel []*linkAttrMeta) ([]int64, []int32, error) {
	n := m.count()
	costs = slices.Grow(costs[:0], n)[:n]
	clear(costs)
	// rank[row] is the row's index among the chunk's matching rows, +1
	// (0: not matching); rows match in row order (rankedChunk.at).
	rows := m.cv.rows
	rank = slices.Grow(rank[:0], rows)[:rows]
	clear(rank)
	for i := range n {
		rank[m.row(i)] = int32(i + 1)
	}
	if per := linkValueBytes(sel, l.intraSegment()); per > 0 && l.intra != "" {
		links, err := l.links0(ctx, m.key)
		if err != nil {
			return costs, rank, err
		}
		w := l.linkWidth
		for r := 0; r+w <= len(links); r += w {
			last := int32(0)
			for _, v := range links[r : r+w] {
				k := rank[v] // links0 checked every row is the chunk's
				if k == 0 {
					last = 0
					break
				}
				last = max(last, k)
			}
			if last > 0 {
				costs[last-1] += per
			}
		}
	}
	sources := l.lay.crossSources(0, []Key{m.key})
	if sources == nil {
		return costs, rank, nil // 0.7: no cross-chunk link has values
	}
	recs, refs, err := l.lay.crossLinkRefs(ctx, 0, sources)
	if err != nil {
		return costs, rank, err
	}
	ks := m.key.String()
	for i, rec := range recs {
		if refs == nil || refs[i].cell == nil || len(rec) != 2 {
			continue
		}
		per := linkValueBytes(sel, refs[i].seg)
		if per == 0 {
			continue
		}
		a, b := rec[0], rec[1]
		if Key(a.Chunk).String() != ks {
			a, b = b, a
		}
		if Key(a.Chunk).String() != ks || a.Row < 0 || a.Row >= int64(rows) || rank[a.Row] == 0 {
			continue // not a link of this chunk's matching rows
		}
		if p := ai.position(Key(b.Chunk).String()); p >= 0 && p < pos {
			costs[rank[a.Row]-1] += per
		}
	}
	return costs, rank, nil
}

// linkValueBytes is the bytes of the values sel keeps for one link of
// the links array seg.
func linkValueBytes(sel []*linkAttrMeta, seg string) int64 {
	per := int64(0)
	for _, a := range sel {
		if a.segs == nil || a.segs[seg] {
			per += int64(max(a.Channels, 1) * a.dt.Size)
		}
	}
	return per
}

// edgeBudget is where the page's rows of chunk m, [first, last), stop
// for their edges' values to fit q.EdgeValueBytes with the spent bytes
// of the page's earlier rows (count of them), which it adds to. The
// page's first row is always taken: a row's edges cannot be split.
func (l *Level) edgeBudget(ctx context.Context, sc *bboxScratch, m *chunkMatch, pos, first, last int, q *BBoxQuery, spent *int64, count int64) (int, error) {
	var err error
	sc.ecost, sc.erank, err = l.edgeCosts(ctx, sc.ecost, sc.erank, &sc.ai, m, pos, q.linkSel)
	if err != nil {
		return last, err
	}
	for i := first; i < last; i++ {
		c := sc.ecost[i]
		if *spent+c > q.EdgeValueBytes && (count > 0 || i > first) {
			return i, nil
		}
		*spent += c
	}
	return last, nil
}
