package zvf

import (
	"context"
	"errors"
)

// Chunk returns one chunk as a tile: its vertices, fragments, the requested
// attributes and its links/0 rows.
func (l *Level) Chunk(ctx context.Context, key Key, attrs []string) (*Tile, error) {
	if len(key) != l.keyArity || !l.hasKey(key) {
		return nil, l.s.errf(ErrNotFound, l.n, "vertices", key.String(), "no chunk %s at level %d", key, l.n)
	}
	sel, err := l.selectAttrs(attrs)
	if err != nil {
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
