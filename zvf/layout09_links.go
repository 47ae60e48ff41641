package zvf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/zvfserve/zvfserve/zvf/ragged"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zarr"
)

// linkFamily is links/<delta>: a policy and its offsets arrays.
type linkFamily struct {
	delta     int
	width     int // link_width L
	directed  bool
	duplicate bool  // store = "duplicate": a copy per distinct endpoint chunk
	numLinks  int64 // -1 unknown
	segs      []*linkSegment
	// ratio: per axis, this level's and the target level's chunk shape in
	// root chunks (cross-level anchors); set at first use.
	ratio *[2][]int64
}

// linkSegment is one links/<delta>/<offsets> array.
type linkSegment struct {
	name    string
	family  string
	offsets []Key // L−1 offsets, one per endpoint after the first
	hasPerm bool
	intra   bool // delta 0, every offset zero: flat rows, with link_fragments
	grid    *gridArray
}

// linkFamilyAttrs are a links/<delta> group's attributes.
type linkFamilyAttrs struct {
	LevelDelta *int   `json:"level_delta"`
	LinkWidth  int    `json:"link_width"`
	Directed   bool   `json:"directed"`
	Store      string `json:"store"`
	NumLinks   *int64 `json:"num_links"`
}

// linkArrayAttrs are a links/<delta>/<offsets> array's attributes.
type linkArrayAttrs struct {
	Offsets    [][]int64 `json:"offsets"`
	HasPerm    bool      `json:"has_perm"`
	LinkWidth  int       `json:"link_width"`
	LevelDelta *int      `json:"level_delta"`
	DType      string    `json:"dtype"`
}

func (y *layout09) openLinks(ctx context.Context) error {
	l := y.l
	names, err := l.children(ctx, "links")
	if err != nil {
		return err
	}
	for _, name := range names {
		d, ok := parseDelta(name)
		if !ok {
			l.s.log.Warn("ZVF 0.9 links/ entry is not a delta (0, +N, -N); ignored", "store", l.s.name, "level", l.n, "entry", name)
			continue
		}
		fam := "links/" + name
		var fa linkFamilyAttrs
		if err := l.attrsOf(ctx, fam, &fa); err != nil {
			return err
		}
		f := &linkFamily{delta: d, width: fa.LinkWidth, directed: fa.Directed, numLinks: -1}
		if fa.NumLinks != nil {
			f.numLinks = *fa.NumLinks
		}
		if f.width == 0 {
			f.width = 2
		}
		switch {
		case f.width < 1 || f.width > ragged.MaxPermWidth:
			return l.s.errf(ErrCorrupt, l.n, fam, "", "link_width %d (1 to %d)", f.width, ragged.MaxPermWidth)
		case fa.LevelDelta != nil && *fa.LevelDelta != d:
			return l.s.errf(ErrCorrupt, l.n, fam, "", "level_delta %d in a family named %s", *fa.LevelDelta, name)
		}
		switch fa.Store {
		case "", "canonical":
		case "duplicate":
			f.duplicate = true
		default:
			return l.s.errf(ErrUnsupported, l.n, fam, "", "store %q (this server reads canonical and duplicate link families)", fa.Store)
		}
		segs, err := l.members(ctx, fam) // each an array: a folder without zarr.json is none
		if err != nil {
			return err
		}
		if len(segs) == 0 {
			// A folder holding neither the family's zarr.json nor an
			// offsets array (left by a crashed writer, a "folder/"
			// marker) is no family: no delta, no link width to check.
			if _, err := l.node(ctx, fam); errors.Is(err, storage.ErrNotFound) {
				continue
			}
		}
		sort.Strings(segs) // the reference's read order: segment names as ASCII strings
		for _, sn := range segs {
			seg, err := y.openSegment(ctx, f, fam, sn)
			if err != nil {
				return err
			}
			f.segs = append(f.segs, seg)
			if seg.intra {
				if d != 0 || l.intra != "" {
					return l.s.errf(ErrCorrupt, l.n, seg.family, "", "a second intra-chunk array")
				}
				l.intra, l.intraPerm = seg.family, seg.hasPerm
			}
		}
		if d == 0 {
			l.linkWidth = f.width
		}
		y.links[d] = f
		l.linkDeltas = append(l.linkDeltas, d)
	}
	return nil
}

func (y *layout09) openSegment(ctx context.Context, f *linkFamily, fam, name string) (*linkSegment, error) {
	l := y.l
	family := fam + "/" + name
	offsets, err := parseOffsets(name, f.width, l.keyArity)
	if err != nil {
		return nil, l.s.errf(ErrCorrupt, l.n, family, "", "offsets segment %q: %v", name, err)
	}
	var a linkArrayAttrs
	if err := l.attrsOf(ctx, family, &a); err != nil {
		return nil, err
	}
	seg := &linkSegment{name: name, family: family, offsets: offsets, hasPerm: a.HasPerm, intra: f.delta == 0}
	for _, o := range offsets {
		for _, c := range o {
			seg.intra = seg.intra && c == 0
		}
	}
	switch {
	case a.Offsets != nil && fmt.Sprint(a.Offsets) != fmt.Sprint(keysAsInts(offsets)):
		return nil, l.s.errf(ErrCorrupt, l.n, family, "", "offsets attribute %v, the segment name says %v", a.Offsets, keysAsInts(offsets))
	case a.LinkWidth != 0 && a.LinkWidth != f.width:
		return nil, l.s.errf(ErrCorrupt, l.n, family, "", "link_width %d in a family of width %d", a.LinkWidth, f.width)
	case a.LevelDelta != nil && *a.LevelDelta != f.delta:
		return nil, l.s.errf(ErrCorrupt, l.n, family, "", "level_delta %d in family %s", *a.LevelDelta, fam)
	case a.DType != "" && a.DType != "int64":
		// Later 0.9.x revisions may write int32 links (zvf-0.9-format §6),
		// but not how their cells are laid out (whether the ragged blob's
		// header and perm_idx narrow too): read as int64 they would be
		// wrong rows, so the array is refused by name.
		return nil, l.s.errf(ErrUnsupported, l.n, family, "", "%s/%s/zarr.json says dtype %q: this server reads only int64 link cells, and the byte layout of %s link cells (a later ZVF 0.9.x revision) is not specified to it", l.path, family, a.DType, a.DType)
	}
	g, err := y.openGrid(ctx, family)
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, l.s.errf(ErrCorrupt, l.n, family, "", "no %s/%s/zarr.json: each offsets segment is one chunk-grid array", l.path, family)
	}
	seg.grid = g
	return seg, nil
}

// attrsOf decodes the attributes of family's zarr.json into v (left as
// is when the document is missing: intermediate groups may lack one).
func (l *Level) attrsOf(ctx context.Context, family string, v any) error {
	node, err := l.node(ctx, family)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return l.s.wrap(kindOf(err), l.n, family, "", err)
	}
	if err := json.Unmarshal(node.Attributes, v); err != nil {
		return l.s.errf(ErrCorrupt, l.n, family, "", "attributes: %v", zarr.JSONError(err))
	}
	return nil
}

func keysAsInts(ks []Key) [][]int64 {
	out := make([][]int64, len(ks))
	for i, k := range ks {
		out[i] = k
	}
	return out
}

// parseOffsets parses an offsets segment (zvf-0.9-format §3.4): width−1
// offsets joined by "_", each dims signed components joined by "."
// ("0", "+1", "-2"); "self" when width is 1.
func parseOffsets(s string, width, dims int) ([]Key, error) {
	if width == 1 {
		if s != "self" {
			return nil, fmt.Errorf("a family of width 1 has the one segment \"self\"")
		}
		return []Key{}, nil
	}
	parts := strings.Split(s, "_")
	if len(parts) != width-1 {
		return nil, fmt.Errorf("%d offsets, a family of width %d has %d", len(parts), width, width-1)
	}
	out := make([]Key, len(parts))
	for i, p := range parts {
		comps := strings.Split(p, ".")
		if len(comps) != dims {
			return nil, fmt.Errorf("offset %q has %d components, want %d", p, len(comps), dims)
		}
		out[i] = make(Key, dims)
		for k, c := range comps {
			v, ok := parseDelta(c)
			if !ok || v > 1<<40 || v < -1<<40 {
				return nil, fmt.Errorf("component %q is not 0, +N or -N", c)
			}
			out[i][k] = int64(v)
		}
	}
	return out, nil
}

// linkRec is one record of a link family as the reference's read_links
// gives it: endpoints in input order, the segment and cell it came from.
type linkRec struct {
	eps  []ragged.Endpoint
	seg  string
	cell string
}

// records decodes the cell of seg at key into records (every stored copy;
// endpoints placed by the offsets, then put back in input order), cached.
func (y *layout09) records(ctx context.Context, f *linkFamily, seg *linkSegment, key Key, ks string) ([][]ragged.Endpoint, error) {
	l := y.l
	v, err := l.cached(ctx, l.cacheKey("links", seg.family, ks), func(ctx context.Context) (any, int64, error) {
		b, err := y.cell(ctx, seg.family, key, ks)
		if errors.Is(err, errMissing) {
			b, err = nil, nil // an empty cell found by listing: no records
		}
		if err != nil {
			return nil, 0, err
		}
		rows, sigma, err := ragged.DecodeLinkCell(b, seg.intra, f.width, seg.hasPerm)
		if err != nil {
			return nil, 0, l.s.errf(ErrCorrupt, l.n, seg.family, ks, "%w (rows of %d endpoints, perm_idx %v, %s)", err, f.width, seg.hasPerm, map[bool]string{true: "flat", false: "ragged"}[seg.intra])
		}
		chunks, err := y.endpointChunks(f, seg, key)
		if err != nil {
			return nil, 0, err
		}
		w := f.width
		n := len(rows) / w
		recs := make([][]ragged.Endpoint, n)
		eps := make([]ragged.Endpoint, n*w)
		for r := range recs {
			rec := eps[r*w : (r+1)*w : (r+1)*w]
			for i := 0; i < w; i++ {
				at := i
				if sigma != nil {
					at = int(sigma[r*w+i])
				}
				rec[at] = ragged.Endpoint{Chunk: chunks[i], Row: rows[r*w+i]}
			}
			recs[r] = rec
		}
		return recs, int64(n*w)*40 + int64(len(b)) + 64, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([][]ragged.Endpoint), nil
}

// endpointChunks gives the chunk of each stored endpoint of a record in
// cell s: s itself, then anchor(s) + o_k, the anchor being s at delta 0 and
// floor(s · r_ℓ / r_ℓ+δ) across levels (r: chunk shape in root chunks).
func (y *layout09) endpointChunks(f *linkFamily, seg *linkSegment, s Key) ([][]int64, error) {
	out := make([][]int64, 1+len(seg.offsets))
	out[0] = append([]int64(nil), s...)
	anchor := out[0]
	if f.delta != 0 {
		r, err := y.ratio(f)
		if err != nil {
			return nil, err
		}
		anchor = make([]int64, len(s))
		for i := range s {
			anchor[i] = floorDiv(s[i]*r[0][i], r[1][i])
		}
	}
	for k, o := range seg.offsets {
		c := make([]int64, len(s))
		for i := range s {
			c[i] = anchor[i] + o[i]
		}
		out[k+1] = c
	}
	return out, nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// ratio is, per chunk-key axis, this level's and the target level's chunk
// shape in root chunks (the leading attribute-bin axis: 1).
func (y *layout09) ratio(f *linkFamily) (*[2][]int64, error) {
	l := y.l
	if r := f.ratio; r != nil {
		return r, nil
	}
	fam := "links/" + deltaName(f.delta)
	t, err := l.s.Level(l.n + f.delta)
	if err != nil {
		return nil, l.s.errf(ErrCorrupt, l.n, fam, "", "links to level %d, which the store does not have", l.n+f.delta)
	}
	r := &[2][]int64{make([]int64, l.keyArity), make([]int64, l.keyArity)}
	off := l.keyArity - l.s.dims
	for i := 0; i < off; i++ {
		r[0][i], r[1][i] = 1, 1
	}
	for i := 0; i < l.s.dims; i++ {
		for j, lv := range []*Level{l, t} {
			q := lv.chunkShape[i] / l.s.root.chunkShape[i]
			if q < 1 || q != float64(int64(q)) {
				return nil, l.s.errf(ErrCorrupt, l.n, fam, "", "level %d chunk_shape %v is not a whole multiple of the root chunk_shape %v, so cross-level anchors are undefined", lv.n, lv.chunkShape, l.s.root.chunkShape)
			}
			r[j][off+i] = int64(q)
		}
	}
	f.ratio = r
	return r, nil
}

// crossSources: keys and, per non-intra offsets segment, each key less
// each of the segment's offsets (a record stored in cell s has endpoints
// in s and s + offset).
func (y *layout09) crossSources(delta int, keys []Key) []Key {
	out := make([]Key, 0, len(keys))
	seen := make(map[string]bool, len(keys))
	add := func(k Key) {
		if ks := k.String(); !seen[ks] {
			seen[ks] = true
			out = append(out, k)
		}
	}
	for _, k := range keys {
		add(k)
	}
	if f := y.links[delta]; f != nil {
		for _, seg := range f.segs {
			if seg.intra {
				continue
			}
			for _, o := range seg.offsets {
				for _, k := range keys {
					s := make(Key, len(k))
					for i := range k {
						s[i] = k[i]
						if i < len(o) {
							s[i] -= o[i]
						}
					}
					add(s)
				}
			}
		}
	}
	slices.SortFunc(out, compareKeys)
	return out
}

// crossLinks: the non-intra records of delta stored in the cells of keys
// (of every cell when keys is nil), each once — with store "duplicate"
// only the copy in the chunk of its first input endpoint answers.
func (y *layout09) crossLinks(ctx context.Context, delta int, keys []Key) ([][]ragged.Endpoint, error) {
	out, _, err := y.cross(ctx, delta, keys, false)
	return out, err
}

// crossLinkRefs: crossLinks, and where each record is stored.
func (y *layout09) crossLinkRefs(ctx context.Context, delta int, keys []Key) ([][]ragged.Endpoint, []linkRef, error) {
	return y.cross(ctx, delta, keys, true)
}

// cross is crossLinks, with each record's linkRef when withRefs.
func (y *layout09) cross(ctx context.Context, delta int, keys []Key, withRefs bool) ([][]ragged.Endpoint, []linkRef, error) {
	f := y.links[delta]
	if f == nil {
		return nil, nil, nil
	}
	var out [][]ragged.Endpoint
	var refs []linkRef
	var strs []string
	if keys != nil {
		strs = make([]string, len(keys))
		for i, k := range keys {
			strs[i] = k.String()
		}
	}
	for _, seg := range f.segs {
		if seg.intra {
			continue
		}
		cells, cellKeys := seg.grid.cells, seg.grid.cellKeys
		if keys != nil {
			cells, cellKeys = strs, keys
		}
		for i, ks := range cells {
			if !seg.grid.present[ks] {
				continue
			}
			recs, err := y.records(ctx, f, seg, cellKeys[i], ks)
			if err != nil {
				return nil, nil, err
			}
			for row, r := range recs {
				if f.duplicate && !Key(r[0].Chunk).equal(cellKeys[i]) {
					continue
				}
				out = append(out, r)
				if withRefs {
					refs = append(refs, linkRef{seg: seg.name, cell: cellKeys[i], row: row})
				}
			}
		}
	}
	return out, refs, nil
}

// readLinks lists every record of links/<delta> in the reference's
// read_links order: segments as ASCII strings, cells as strings, rows as
// written; every stored copy.
func (l *Level) readLinks(ctx context.Context, delta int) ([]linkRec, error) {
	y, ok := l.lay.(*layout09)
	if !ok {
		return nil, l.s.errf(ErrUnsupported, l.n, "links/"+deltaName(delta), "", "link families are a ZVF 0.9 layout")
	}
	f := y.links[delta]
	if f == nil {
		return nil, l.s.errf(ErrNotFound, l.n, "links/"+deltaName(delta), "", "no links/%s family", deltaName(delta))
	}
	var out []linkRec
	for _, seg := range f.segs {
		for i, ks := range seg.grid.cells {
			recs, err := y.records(ctx, f, seg, seg.grid.cellKeys[i], ks)
			if err != nil {
				return nil, err
			}
			for _, r := range recs {
				out = append(out, linkRec{eps: r, seg: seg.name, cell: ks})
			}
		}
	}
	return out, nil
}
