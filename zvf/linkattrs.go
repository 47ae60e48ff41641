package zvf

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/zvfserve/zvfserve/zvf/ragged"
	"github.com/zvfserve/zvfserve/zvf/zarr"
)

// linkAttrMeta is one link attribute of a level: per-edge values kept in
// link_attributes/<name>/0, whose cells hold one row per row of the
// matching links cell (zvf-format §6.3; zvf-0.9-format §3.4).
type linkAttrMeta struct {
	AttrInfo
	dt zarr.DataType
	// channelsKnown: Channels is the level's (0.9's row_shape, or a 0.7
	// chunk's bytes read at open); else each answer's cells tell.
	channelsKnown bool
	// segs (0.9) are the offsets segments the attribute has an array for.
	segs map[string]bool
	// nullCode: a dictionary-encoded attribute's _FillValue code (its
	// Categories, in AttrInfo, label the others).
	nullCode *int64
}

// dictionary makes m categorical when its array is dictionary-encoded,
// as readAttributes does for vertex attributes: its values are codes
// into its categories.
func (m *linkAttrMeta) dictionary(a *zvArrayAttrs) {
	if a.Encoding != "dictionary" {
		return
	}
	m.Categories = a.Categories
	if m.Categories == nil {
		m.Categories = []string{}
	}
	m.nullCode = a.FillValue
}

// linkRef is where a link record is stored: row row of the cell at chunk
// cell of the links array seg (a ZVF 0.9 offsets segment; "" for 0.7's
// links/0), the row of the same cell of each link attribute that holds
// the record's values. A nil cell: no link attribute row follows it (a
// 0.7 cross-chunk link, a skeleton parent the rows' order implies).
type linkRef struct {
	seg  string
	cell Key
	row  int
}

// intraSegment is the seg of a linkRef to the level's intra-chunk links.
func (l *Level) intraSegment() string {
	if _, ok := l.lay.(*layout09); ok {
		return strings.TrimPrefix(l.intra, "links/0/")
	}
	return ""
}

// linkAttrFamily is the family holding attribute a's rows for the links
// of segment seg.
func (l *Level) linkAttrFamily(a *linkAttrMeta, seg string) string {
	if seg == "" {
		return "link_attributes/" + a.Name + "/0"
	}
	return "link_attributes/" + a.Name + "/0/" + seg
}

// readLinkAttributes finds the level's link attributes of delta 0 (the
// only delta writers keep them for), sorted by name. One the server
// cannot read (a string dtype) is set aside in lunserved: the edges and
// the other attributes are readable without it, as the level was before
// link attributes were read at all.
func (l *Level) readLinkAttributes(ctx context.Context) error {
	names, err := l.children(ctx, "link_attributes")
	if err != nil || len(names) == 0 {
		return err
	}
	slices.Sort(names)
	y09, is09 := l.lay.(*layout09)
	for _, name := range names {
		if is09 {
			m, err := l.linkAttr09(ctx, y09, name)
			if l.unserved(name, err) {
				continue
			}
			if err != nil {
				return err
			}
			if m != nil {
				l.lattrs = append(l.lattrs, m)
			}
			continue
		}
		deltas, err := l.children(ctx, "link_attributes/"+name)
		if err != nil {
			return err
		}
		if !slices.Contains(deltas, "0") {
			continue
		}
		fam := "link_attributes/" + name + "/0"
		a, dt, err := l.valueArray(ctx, fam)
		if l.unserved(name, err) {
			continue
		}
		if err != nil {
			return err
		}
		m := &linkAttrMeta{AttrInfo: AttrInfo{Name: name, DType: dt.Name, Channels: 1}, dt: dt}
		m.dictionary(a)
		if n := len(a.ChannelNames); n > 0 {
			if n > maxObjectChannels {
				return l.s.errf(ErrCorrupt, l.n, fam, "", "%d channel_names (at most %d)", n, maxObjectChannels)
			}
			m.Channels, m.channelsKnown = n, true
		} else {
			// The chunks holding a cell of the attribute hold links: a
			// level's first chunks may hold none.
			cells, err := l.children(ctx, fam)
			if err != nil {
				return err
			}
			slices.Sort(cells)
			var keys []Key
			for _, c := range cells {
				if i, ok := l.keySet[c]; ok {
					keys = append(keys, l.keys[i])
				}
			}
			if len(keys) == 0 {
				keys = l.keys // a layout that keeps no folder a cell
			}
			if err := l.sampleLinkChannels(ctx, m, fam, keys); err != nil {
				return err
			}
		}
		l.lattrs = append(l.lattrs, m)
	}
	return nil
}

// unserved sets link attribute name aside when err says the server
// does not read it.
func (l *Level) unserved(name string, err error) bool {
	if !errors.Is(err, ErrUnsupported) {
		return false
	}
	if l.lunserved == nil {
		l.lunserved = map[string]error{}
	}
	l.lunserved[name] = err
	return true
}

// linkAttr09 opens link_attributes/<name>/0's offsets arrays, which must
// agree on dtype and row_shape; nil when there are none.
func (l *Level) linkAttr09(ctx context.Context, y *layout09, name string) (*linkAttrMeta, error) {
	base := "link_attributes/" + name + "/0"
	segs, err := l.arrays(ctx, base)
	if err != nil || len(segs) == 0 {
		return nil, err
	}
	slices.Sort(segs)
	var m *linkAttrMeta
	var intraKeys []Key
	first := ""
	for _, seg := range segs {
		fam := base + "/" + seg
		a, dt, err := l.valueArray(ctx, fam)
		if err != nil {
			return nil, err
		}
		ch, known := 1, a.RowShape != nil
		switch len(a.RowShape) {
		case 0: // [] is one value a row; no row_shape, the cells tell
		case 1:
			if c := a.RowShape[0]; c < 1 || c > maxObjectChannels {
				return nil, l.s.errf(ErrCorrupt, l.n, fam, "", "row_shape %v (channels from 1 to %d)", a.RowShape, maxObjectChannels)
			}
			ch = int(a.RowShape[0])
		default:
			return nil, l.s.errf(ErrCorrupt, l.n, fam, "", "row_shape %v (a link attribute's rows are [] or [C])", a.RowShape)
		}
		if m == nil {
			m = &linkAttrMeta{AttrInfo: AttrInfo{Name: name, DType: dt.Name, Channels: ch}, dt: dt, channelsKnown: known, segs: map[string]bool{}}
			first = seg
			m.dictionary(a)
		} else if m.DType != dt.Name || m.Channels != ch || m.channelsKnown != known {
			return nil, l.s.errf(ErrCorrupt, l.n, fam, "", "%s rows of %d values, where %s/%s holds %s rows of %d", dt.Name, ch, base, first, m.DType, m.Channels)
		}
		g, err := y.openGrid(ctx, fam)
		if err != nil {
			return nil, err
		}
		if seg == l.intraSegment() && g != nil {
			// The cells the intra-chunk array holds hold links: a
			// level's first chunks may hold none.
			for i, c := range g.cells {
				if g.present[c] {
					intraKeys = append(intraKeys, g.cellKeys[i])
				}
			}
		}
		m.segs[seg] = true
	}
	if !m.channelsKnown && m.segs[l.intraSegment()] {
		if len(intraKeys) == 0 {
			intraKeys = l.keys
		}
		if err := l.sampleLinkChannels(ctx, m, base+"/"+l.intraSegment(), intraKeys); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// sampleLinkChannels works out the values a row of a link attribute that
// does not say (0.7 writers name no channels, a 0.9 array without
// row_shape) from the first of keys with intra-chunk links (fam: its
// array for them), as sampleChannels does for vertex attributes; a chunk
// that is corrupt or lacks the attribute is passed over.
func (l *Level) sampleLinkChannels(ctx context.Context, m *linkAttrMeta, fam string, keys []Key) error {
	if l.intra == "" {
		return nil
	}
	for i := 0; i < len(keys) && i < maxChannelSamples; i++ {
		key := keys[i]
		ks := key.String()
		b, err := l.lay.cell(ctx, l.intra, key, ks)
		switch {
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrCorrupt):
			continue
		case err != nil:
			return err
		}
		rows, _, err := ragged.DecodeLinkCell(b, true, l.linkWidth, l.intraPerm)
		if err != nil {
			continue // corrupt: the requests that read it fail
		}
		n := len(rows) / l.linkWidth
		if n == 0 {
			continue
		}
		ab, err := l.lay.cell(ctx, fam, key, ks)
		switch {
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrCorrupt):
			continue
		case err != nil:
			return err
		}
		if len(ab) == 0 || len(ab)%(n*m.dt.Size) != 0 || len(ab)/(n*m.dt.Size) > maxObjectChannels {
			continue
		}
		m.Channels, m.channelsKnown = len(ab)/(n*m.dt.Size), true
		return nil
	}
	return nil
}

// LinkAttributes lists the level's link attributes (do not modify).
func (l *Level) LinkAttributes() []AttrInfo { return l.info.LinkAttributes }

// UnservedLinkAttribute is why the level's link attribute name, which
// LinkAttributes leaves out, cannot be read (ErrUnsupported); nil when
// the level has no such attribute.
func (l *Level) UnservedLinkAttribute(name string) error { return l.lunserved[name] }

// selectLinkAttrs resolves a query's link attribute names.
func (l *Level) selectLinkAttrs(names []string) ([]*linkAttrMeta, error) {
	if len(names) == 1 && names[0] == "*" {
		return l.lattrs, nil
	}
	out := make([]*linkAttrMeta, 0, len(names))
	for _, n := range names {
		i := slices.IndexFunc(l.lattrs, func(a *linkAttrMeta) bool { return a.Name == n })
		if err := l.lunserved[n]; i < 0 && err != nil {
			return nil, err
		}
		if i < 0 {
			return nil, l.s.errf(ErrNotFound, l.n, "", "", "no link attribute %q at level %d", n, l.n)
		}
		out = append(out, l.lattrs[i])
	}
	return out, nil
}

// linkCell is one links cell's rows of one link attribute.
type linkCell struct {
	data []byte // nil: the attribute has no cell there
	rows int    // rows of the links cell
}

// linkRows is the number of records stored in the links cell a ref names.
func (l *Level) linkRows(ctx context.Context, ref linkRef) (int, error) {
	y, is09 := l.lay.(*layout09)
	if ref.seg == l.intraSegment() {
		rows, err := l.links0(ctx, ref.cell)
		if err != nil {
			return 0, err
		}
		return len(rows) / l.linkWidth, nil
	}
	if !is09 {
		return 0, l.s.errf(ErrCorrupt, l.n, "links/0", ref.cell.String(), "no links array %q", ref.seg)
	}
	f := y.links[0]
	for _, seg := range f.segs {
		if seg.name == ref.seg {
			recs, err := y.records(ctx, f, seg, ref.cell, ref.cell.String())
			return len(recs), err
		}
	}
	return 0, l.s.errf(ErrCorrupt, l.n, "links/0/"+ref.seg, ref.cell.String(), "no such links array")
}

// refCell is what edgeColumns knows ref's cell by: its key's array.
func refCell(ref linkRef) *int64 {
	if ref.cell == nil {
		return nil
	}
	return &ref.cell[0]
}

// edgeColumns gathers the values of the link attributes sel for edges
// stored where refs say. A cell whose bytes are not one row per link row
// of its links cell is corrupt, named by array and cell: rows that do not
// line up are never served as another edge's values.
func (l *Level) edgeColumns(ctx context.Context, sel []*linkAttrMeta, refs []linkRef) ([]EdgeColumn, error) {
	out := make([]EdgeColumn, len(sel))
	// A cell is known by its key's array: the refs of one cell share it
	// (the scope's key, the grid's cell key), so no key is formatted an
	// edge; a cell met through two arrays is merely read twice.
	type cellID struct {
		seg string
		key *int64
	}
	nrows := map[cellID]int{}
	for k, a := range sel {
		cells := map[cellID]linkCell{}
		ch := 0 // values a row, from the first cell holding rows unless the level knows it
		if a.channelsKnown {
			ch = a.Channels
		}
		for _, ref := range refs {
			if ref.cell == nil {
				continue
			}
			id := cellID{ref.seg, &ref.cell[0]}
			if _, ok := cells[id]; ok {
				continue
			}
			n, ok := nrows[id]
			if !ok {
				var err error
				if n, err = l.linkRows(ctx, ref); err != nil {
					return nil, err
				}
				nrows[id] = n
			}
			fam := l.linkAttrFamily(a, ref.seg)
			if a.segs != nil && !a.segs[ref.seg] {
				cells[id] = linkCell{rows: n}
				continue
			}
			b, err := l.blob(ctx, fam, ref.cell)
			if errors.Is(err, ErrNotFound) {
				cells[id] = linkCell{rows: n}
				continue
			}
			if err != nil {
				return nil, err
			}
			size := a.dt.Size
			if ch == 0 && n > 0 && len(b) > 0 && len(b)%(n*size) == 0 {
				ch = len(b) / (n * size)
			}
			if want := n * max(ch, 1) * size; len(b) != want {
				return nil, l.s.errf(ErrCorrupt, l.n, fam, ref.cell.String(), "%d bytes, want %d rows (one per row of its links cell) × %d × %s", len(b), n, max(ch, 1), a.dt.Name)
			}
			cells[id] = linkCell{data: b, rows: n}
		}
		ch = max(ch, 1)
		col := Column{Name: a.Name, DType: a.dt.Name, Channels: ch, typ: a.dt, Categories: a.Categories, NullCode: a.nullCode}
		rb := ch * a.dt.Size
		// Only the edges with a stored value take a row: their values
		// were read, so the column is bounded by the reads; an edge
		// without one costs a byte of valid.
		has := func(ref linkRef) bool {
			c := cells[cellID{ref.seg, refCell(ref)}]
			return ref.cell != nil && c.data != nil && ref.row < c.rows
		}
		var valid []bool
		stored := 0
		for i, ref := range refs {
			switch {
			case has(ref):
				stored++
			case valid == nil:
				valid = make([]bool, len(refs))
				for j := range i {
					valid[j] = true
				}
			}
			if valid != nil {
				valid[i] = has(ref)
			}
		}
		col.Data = make([]byte, 0, stored*rb)
		for _, ref := range refs {
			if has(ref) {
				c := cells[cellID{ref.seg, refCell(ref)}]
				col.Data = append(col.Data, c.data[ref.row*rb:(ref.row+1)*rb]...)
			}
		}
		ec, err := NewEdgeColumn(col, valid)
		if err != nil {
			return nil, err
		}
		out[k] = ec
	}
	return out, nil
}
