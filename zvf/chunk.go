package zvf

import (
	"context"
	"errors"
)

// Chunk returns one chunk as a tile: its vertices, fragments, the requested
// attributes and its links/0 rows.
func (l *Level) Chunk(ctx context.Context, key Key, attrs []string) (*Tile, error) {
	sel, err := l.chunkAttrs(key, attrs)
	if err != nil {
		if l.s.watched && len(key) == l.keyArity && !l.hasKey(key) {
			// The open's listing may be behind the store's writes: a
			// 404 for a chunk that is there would be a wrong answer.
			return nil, l.unlisted(ctx, key, "a request for the chunk", err)
		}
		return nil, err
	}
	cv, err := l.vertices(ctx, key)
	if err != nil {
		return nil, err
	}
	t := &Tile{Key: key, Rows: cv.rows, Vertices: Column{Name: "vertices", DType: l.vdt.Name, typ: l.vdt, Channels: l.s.dims, Data: cv.data}}
	if cv.frags != nil {
		t.Fragments = make([][2]int64, cv.frags.Len())
		for f := range t.Fragments {
			if s, c, ok := cv.frags.Range(f); ok {
				t.Fragments[f] = [2]int64{s, c}
			} else {
				t.Fragments[f] = [2]int64{-1, int64(len(cv.frags.Indices(f)))}
			}
		}
	} else {
		t.Fragments = [][2]int64{{0, int64(cv.rows)}}
	}
	for _, a := range sel {
		data, ch, err := l.attribute(ctx, a, key, cv.rows)
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				continue
			}
			return nil, err
		}
		t.Attributes = append(t.Attributes, Column{Name: a.Name, DType: a.dt.Name, typ: a.dt, Channels: ch, Data: data, Categories: a.Categories, NullCode: a.nullCode})
	}
	if l.intra != "" {
		links, err := l.links0(ctx, key)
		if err != nil {
			return nil, err
		}
		t.Links, t.LinkWidth = links, l.linkWidth
	}
	return t, nil
}

// ChunkLinkAttributes reads the link attributes names (["*"]: all) for
// the chunk's intra-chunk links: a row per row of its Tile.Links, in
// that order. nil when names select none.
func (l *Level) ChunkLinkAttributes(ctx context.Context, key Key, names []string) ([]EdgeColumn, error) {
	if len(key) != l.keyArity || !l.hasKey(key) {
		return nil, l.s.errf(ErrNotFound, l.n, "vertices", key.String(), "no chunk %s at level %d", key, l.n)
	}
	sel, err := l.selectLinkAttrs(names)
	if err != nil || len(sel) == 0 {
		return nil, err
	}
	var refs []linkRef
	if l.intra != "" {
		links, err := l.links0(ctx, key)
		if err != nil {
			return nil, err
		}
		// Row i of the links cell is row i of each attribute's cell, as
		// for the bbox route's edges (connect).
		refs = make([]linkRef, len(links)/l.linkWidth)
		seg := l.intraSegment()
		for i := range refs {
			refs[i] = linkRef{seg: seg, cell: key, row: i}
		}
	}
	return l.edgeColumns(ctx, sel, refs)
}

// CheckChunk is the error Chunk(key, attrs) fails with before it reads
// anything — no such chunk, no such attribute —, nil when it would read:
// found from the level's metadata alone, so that a caller may refuse the
// request (a failed precondition) before the chunk's bytes are read.
func (l *Level) CheckChunk(key Key, attrs []string) error {
	_, err := l.chunkAttrs(key, attrs)
	return err
}

// chunkAttrs checks that the level has chunk key, and resolves attrs.
func (l *Level) chunkAttrs(key Key, attrs []string) ([]*attrMeta, error) {
	if len(key) != l.keyArity || !l.hasKey(key) {
		return nil, l.s.errf(ErrNotFound, l.n, "vertices", key.String(), "no chunk %s at level %d", key, l.n)
	}
	return l.selectAttrs(attrs)
}

// LinkWidth is the number of vertices of each of a chunk's links (2: an
// edge; 0: the level has none).
func (l *Level) LinkWidth() int { return l.linkWidth }
