package zvf

import (
	"context"
	"errors"

	"github.com/zvfserve/zvfserve/zvf/ragged"
	"github.com/zvfserve/zvfserve/zvf/zarr"
)

func (l *Level) groups(ctx context.Context) (*ragged.Groups, error) {
	v, err := l.cached(ctx, l.cacheKey("groups"), func(ctx context.Context) (any, int64, error) {
		if l.s.format == format09 {
			return l.groups09(ctx)
		}
		read := func(name string) ([]byte, error) {
			a, err := zarr.OpenArray(ctx, l.s.st, join(l.path, "groups/"+name), l.s.codecs)
			if err != nil {
				return nil, l.lazyErr(err, "groups/"+name)
			}
			b, err := a.ReadBytes(ctx)
			if err != nil {
				return nil, l.s.wrap(kindOf(err), l.n, "groups/"+name, "", err)
			}
			return b, nil
		}
		d, err := read("data")
		if err != nil {
			return nil, 0, err
		}
		o, err := read("offsets")
		if err != nil {
			return nil, 0, err
		}
		g, err := ragged.DecodeGroups(d, o)
		if err != nil {
			return nil, 0, l.s.errf(ErrCorrupt, l.n, "groups", "", "%w", err)
		}
		return g, int64(len(d)+len(o)) * 2, nil
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, l.s.errf(ErrNotFound, l.n, "groups", "", "level %d has no groups", l.n)
		}
		return nil, err
	}
	return v.(*ragged.Groups), nil
}

// groups09 reads ZVF 0.9's groups: one variable-length array, element g
// holding group g's member ids (little-endian int64), or empty for a range
// group whose [start, stop) is in group_ranges.
func (l *Level) groups09(ctx context.Context) (any, int64, error) {
	arr, err := zarr.OpenArray(ctx, l.s.st, join(l.path, "groups"), l.s.codecs)
	if err != nil {
		return nil, 0, l.lazyErr(err, "groups")
	}
	if m := arr.Meta(); len(m.Shape) != 1 || !m.DataType.Variable() {
		return nil, 0, l.s.errf(ErrCorrupt, l.n, "groups", "", "%s, where ZVF 0.9 groups are a 1-D variable_length_bytes array", m)
	}
	c, err := arr.Read(ctx)
	if err != nil {
		return nil, 0, l.s.wrap(kindOf(err), l.n, "groups", "", err)
	}
	// Range members are not backed by bytes: at most one per object (or
	// 2^24 on a level without an object index), and no more than a
	// decoded chunk may hold (8 bytes a member): num_objects is the same
	// metadata's word, and 2^31 of them were 16 GiB.
	maxRange := int64(1 << 24)
	if l.objects != nil {
		maxRange = l.objects.num
	}
	maxRange = min(maxRange, l.s.codecs.Limits().MaxChunkBytes/8)
	g, err := ragged.GroupsFromElements(c.Elems, l.groupRanges, maxRange)
	if err != nil {
		return nil, 0, l.s.errf(ErrCorrupt, l.n, "groups", "", "%w", err)
	}
	size := 64 + 24*int64(len(c.Elems))
	for i := range g.Len() {
		size += 8 * int64(len(g.Members(i))) // range members included
	}
	return g, 2 * size, nil
}

// Group returns the member object ids of group id.
func (l *Level) Group(ctx context.Context, id int64) ([]int64, error) {
	g, err := l.groups(ctx)
	if err != nil {
		return nil, err
	}
	if id >= int64(g.Len()) && id < l.numGroups {
		return nil, l.checkGroupCount(g) // a group the level lists (GroupCount) is no absence
	}
	if id < 0 || id >= int64(g.Len()) {
		return nil, l.s.errf(ErrNotFound, l.n, "groups", "", "no group %d (level %d has %d)", id, l.n, g.Len())
	}
	return g.Members(int(id)), nil
}

// checkGroupCount: num_groups (the level's GroupCount) must be the groups
// the array holds.
func (l *Level) checkGroupCount(g *ragged.Groups) error {
	if l.numGroups != int64(g.Len()) {
		return l.s.errf(ErrCorrupt, l.n, "groups", "", "num_groups is %d, the groups array holds %d", l.numGroups, g.Len())
	}
	return nil
}
