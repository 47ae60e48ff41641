package zvf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/zvfserve/zvfserve/zvf/ragged"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zarr"
)

// layout09 is ZVF 0.9's layout (zvf-0.9-format §3): each family is one
// Zarr array of variable-length cells over the level's chunk grid, the
// cell of chunk C at index C − origin; its nonempty_chunks attribute lists
// the cells written, so an empty cell is known without a read. Cells may
// be compressed and sharded (sharding_indexed: one range read a cell once
// the shard's index is cached). Links are families links/<delta>/<offsets>
// whose cell at chunk s holds the records stored from s.
type layout09 struct {
	l     *Level
	fams  map[string]*gridArray // every chunk-grid family the reader uses, opened at Open
	verts *gridArray
	links map[int]*linkFamily
	shard bool
}

// gridArray is one chunk-grid family.
type gridArray struct {
	family string
	arr    *zarr.Array
	origin []int64 // chunk key of cell 0
	grid   []int64 // the array's shape: cells per axis
	chunk  []int64 // cells per Zarr chunk (per shard when sharded)
	inner  []int64 // cells per inner chunk; nil unless read by inner chunk
	// present: the cells written (nonempty_chunks, or found by listing);
	// cells and cellKeys list them sorted as strings, the reference's
	// read order; keys numerically.
	present  map[string]bool
	listed   bool // present came from nonempty_chunks, whose cells hold bytes
	cells    []string
	cellKeys []Key
	keys     []Key
}

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

func newLayout09(l *Level) *layout09 {
	return &layout09{l: l, fams: map[string]*gridArray{}, links: map[int]*linkFamily{}}
}

func (y *layout09) sharded() bool { return y.shard }

func (y *layout09) chunks() []Key { return y.verts.keys }

func (y *layout09) open(ctx context.Context) error {
	l := y.l
	v, err := y.openGrid(ctx, "vertices")
	if err != nil {
		return err
	}
	if v == nil {
		return l.s.errf(ErrCorrupt, l.n, "vertices", "", "no %s/vertices/zarr.json: a ZVF 0.9 level keeps its vertices in one chunk-grid array", l.path)
	}
	y.verts = v
	y.shard = v.inner != nil
	families := []string{"vertex_fragments", "link_fragments"}
	for _, a := range l.vattrs {
		families = append(families, "vertex_attributes/"+a.Name)
	}
	for _, f := range families {
		if _, err := y.openGrid(ctx, f); err != nil {
			return err
		}
	}
	return y.openLinks(ctx)
}

// openGrid opens family's chunk-grid array (nil when the level has none)
// and records it.
func (y *layout09) openGrid(ctx context.Context, family string) (*gridArray, error) {
	l := y.l
	node, err := l.node(ctx, family)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, l.s.wrap(kindOf(err), l.n, family, "", err)
	}
	fail := func(format string, a ...any) (*gridArray, error) {
		return nil, l.s.errf(ErrCorrupt, l.n, family, "", "%s/%s/zarr.json: %s", l.path, family, fmt.Sprintf(format, a...))
	}
	if node.Type != zarr.NodeArray {
		return fail("a Zarr %s, where ZVF 0.9 keeps the family in one chunk-grid array of variable-length cells (a 0.6/0.7 store labelled 0.9?)", node.Type)
	}
	m := node.Array
	if !m.DataType.Variable() {
		return fail("data_type %s, where a ZVF 0.9 chunk-grid array holds variable_length_bytes cells", m.DataType.Name)
	}
	if len(m.Shape) != l.keyArity {
		return fail("shape %v has %d axes, the level's chunk keys %d", m.Shape, len(m.Shape), l.keyArity)
	}
	arr, err := zarr.NewArray(l.s.st, join(l.path, family), m, l.s.codecs)
	if err != nil {
		return nil, l.s.wrap(kindOf(err), l.n, family, "", err)
	}
	var a struct {
		Nonempty []string `json:"nonempty_chunks"`
		Origin   []int64  `json:"chunk_grid_origin"`
	}
	if err := json.Unmarshal(node.Attributes, &a); err != nil {
		return fail("attributes: nonempty_chunks must be a list of chunk keys and chunk_grid_origin of integers: %v", err)
	}
	g := &gridArray{family: family, arr: arr, grid: m.Shape, chunk: m.ChunkShape, origin: make([]int64, len(m.Shape)), present: map[string]bool{}}
	switch {
	case len(a.Origin) == len(m.Shape):
		g.origin = a.Origin
	case a.Origin != nil:
		return fail("chunk_grid_origin %v does not have %d axes", a.Origin, len(m.Shape))
	}
	if arr.Sharded() {
		g.inner = arr.InnerChunkShape()
	}
	for _, ks := range a.Nonempty {
		key, err := ParseKey(ks)
		if err != nil || len(key) != len(m.Shape) {
			return fail("nonempty_chunks names %q, not a chunk key of %d integers", ks, len(m.Shape))
		}
		if _, ok := g.index(key); !ok {
			return fail("nonempty_chunks names chunk %s, outside the grid of %v cells at origin %v", ks, g.grid, g.origin)
		}
		g.add(key)
	}
	g.listed = len(a.Nonempty) > 0
	if len(a.Nonempty) == 0 {
		// Writers that record presence later (record_presence=False)
		// leave the list empty: the cells on disk say which exist.
		if err := y.listCells(ctx, g); err != nil {
			return nil, err
		}
		if len(g.present) > 0 {
			l.s.log.Warn("ZVF 0.9 array without nonempty_chunks: cells found by listing", "store", l.s.name, "array", join(l.path, family), "cells", len(g.present))
		}
	}
	sort.Strings(g.cells)
	g.cellKeys = make([]Key, len(g.cells))
	for i, ks := range g.cells {
		g.cellKeys[i], _ = ParseKey(ks)
	}
	g.keys = append([]Key(nil), g.cellKeys...)
	sort.Slice(g.keys, func(i, j int) bool { return compareKeys(g.keys[i], g.keys[j]) < 0 })
	y.fams[family] = g
	return g, nil
}

// index is key's cell index, or false when key lies outside the grid.
func (g *gridArray) index(key Key) ([]int64, bool) {
	if len(key) != len(g.grid) {
		return nil, false
	}
	idx := make([]int64, len(key))
	for i, c := range key {
		o := g.origin[i]
		idx[i] = c - o
		if (o > 0 && idx[i] > c) || (o < 0 && idx[i] < c) || idx[i] < 0 || idx[i] >= g.grid[i] {
			return nil, false // overflowed, or outside
		}
	}
	return idx, true
}

func (g *gridArray) add(key Key) {
	ks := key.String()
	if !g.present[ks] {
		g.present[ks] = true
		g.cells = append(g.cells, ks)
	}
}

// listCells finds a family's cells from the objects under it: each stored
// chunk (each stored inner chunk of a shard) holds cells.
func (y *layout09) listCells(ctx context.Context, g *gridArray) error {
	l := y.l
	m := g.arr.Meta()
	prefix := join(l.path, g.family) + "/"
	var chunks [][]int64
	err := l.s.st.Walk(ctx, prefix, func(key string, _ storage.Attrs) error {
		rest := strings.TrimPrefix(key, prefix)
		if rest == "zarr.json" || strings.HasSuffix(rest, "/zarr.json") {
			return nil
		}
		c, ok := parseChunkKey(m.KeyEncoding, rest, len(m.Shape))
		if !ok {
			return nil
		}
		chunks = append(chunks, c)
		return nil
	})
	if err != nil {
		return l.s.wrap(kindOf(err), l.n, g.family, "", err)
	}
	for _, c := range chunks {
		if g.inner == nil {
			g.addBlock(c, g.chunk, nil)
			continue
		}
		ix, err := g.arr.ReadShardIndex(ctx, c)
		if err != nil {
			return l.s.wrap(kindOf(err), l.n, g.family, "", err)
		}
		in := make([]int64, len(c))
		for {
			if ix.Present(in) {
				g.addBlock(c, g.chunk, in)
			}
			if !next(in, shardGrid(g.chunk, g.inner)) {
				break
			}
		}
	}
	return nil
}

// addBlock marks present every cell of Zarr chunk c (of inner chunk in,
// when sharded) that lies inside the grid.
func (g *gridArray) addBlock(c, chunk, in []int64) {
	lo := make([]int64, len(c))
	span := chunk
	for i := range c {
		lo[i] = c[i] * chunk[i]
		if in != nil {
			lo[i] += in[i] * g.inner[i]
			span = g.inner
		}
	}
	at := make([]int64, len(c))
	for {
		key := make(Key, len(c))
		inside := true
		for i := range c {
			idx := lo[i] + at[i]
			inside = inside && idx < g.grid[i]
			key[i] = idx + g.origin[i]
		}
		if inside {
			g.add(key)
		}
		if !next(at, span) {
			return
		}
	}
}

func shardGrid(chunk, inner []int64) []int64 {
	out := make([]int64, len(chunk))
	for i := range chunk {
		out[i] = chunk[i] / inner[i]
	}
	return out
}

// next advances coords through the box [0, shape) in C order; false once
// it wraps.
func next(coords, shape []int64) bool {
	for d := len(coords) - 1; d >= 0; d-- {
		coords[d]++
		if coords[d] < shape[d] {
			return true
		}
		coords[d] = 0
	}
	return false
}

// parseChunkKey reverses a key encoding: "c/1/2/3" (default, "/"),
// "c.1.2.3" (default, "."), "1.2.3" (v2).
func parseChunkKey(enc zarr.KeyEncoding, s string, rank int) ([]int64, bool) {
	if enc.Name == "default" {
		if !strings.HasPrefix(s, "c"+enc.Separator) {
			return nil, false
		}
		s = s[1+len(enc.Separator):]
	}
	parts := strings.Split(s, enc.Separator)
	if len(parts) != rank {
		return nil, false
	}
	out := make([]int64, rank)
	for i, p := range parts {
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil || v < 0 {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}

func (y *layout09) cell(ctx context.Context, family string, key Key, ks string) ([]byte, error) {
	g := y.fams[family]
	if g == nil || !g.present[ks] {
		return nil, y.l.s.errf(ErrNotFound, y.l.n, family, ks, "%w", errMissing)
	}
	return y.read(ctx, g, key, ks)
}

// read fetches the cell of a present key: with sharding the shard's index
// (cached) and one range read, else the chunk holding it.
func (y *layout09) read(ctx context.Context, g *gridArray, key Key, ks string) ([]byte, error) {
	l := y.l
	idx, ok := g.index(key)
	if !ok {
		return nil, l.s.errf(ErrCorrupt, l.n, g.family, ks, "chunk lies outside the grid of %v cells at origin %v", g.grid, g.origin)
	}
	d := len(idx)
	outer := make([]int64, d)
	pos := make([]int64, d)
	for i := range idx {
		outer[i], pos[i] = idx[i]/g.chunk[i], idx[i]%g.chunk[i]
	}
	var c *zarr.Chunk
	var err error
	if g.inner == nil {
		c, err = g.arr.ReadChunk(ctx, outer)
	} else {
		in := make([]int64, d)
		for i := range pos {
			in[i], pos[i] = pos[i]/g.inner[i], pos[i]%g.inner[i]
		}
		var ix *zarr.ShardIndex
		if ix, err = y.shardIndex(ctx, g, outer); err == nil {
			c, err = g.arr.ReadInner(ctx, ix, in)
		}
	}
	if err != nil {
		return nil, l.s.wrap(kindOf(err), l.n, g.family, ks, err)
	}
	// The cell's place in the chunk it was read with (C order).
	var e int64
	for i := range pos {
		e = e*c.Shape[i] + pos[i]
	}
	if e >= int64(len(c.Elems)) {
		return nil, l.s.errf(ErrCorrupt, l.n, g.family, ks, "cell %d of a chunk of %d", e, len(c.Elems))
	}
	if len(c.Elems[e]) == 0 && g.listed {
		// A chunk or inner chunk that is not stored reads as the fill
		// value; nonempty_chunks says this one was written.
		return nil, l.s.errf(ErrCorrupt, l.n, g.family, ks, "%s/%s: nonempty_chunks lists chunk %s, but its cell is empty or not stored", l.path, g.family, ks)
	}
	if len(c.Elems) > 1 {
		return bytes.Clone(c.Elems[e]), nil // not the whole chunk's buffer, kept by the cache
	}
	return c.Elems[e], nil
}

func (y *layout09) shardIndex(ctx context.Context, g *gridArray, shard []int64) (*zarr.ShardIndex, error) {
	l := y.l
	v, err := l.cached(ctx, l.cacheKey("shardindex", g.family, Key(shard).String()), func(ctx context.Context) (any, int64, error) {
		ix, err := g.arr.ReadShardIndex(ctx, shard)
		if err != nil {
			return nil, 0, err
		}
		return ix, ix.SizeBytes(), nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*zarr.ShardIndex), nil
}

// ---- links ----

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
		segs, err := l.children(ctx, fam)
		if err != nil {
			return err
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
		return nil, l.s.errf(ErrUnsupported, l.n, family, "", "link rows of dtype %s (this server reads int64 link cells)", a.DType)
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
		return l.s.errf(ErrCorrupt, l.n, family, "", "attributes: %v", err)
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

// crossLinks: the non-intra records of delta stored in the cells of keys
// (of every cell when keys is nil), each once — with store "duplicate"
// only the copy in the chunk of its first input endpoint answers.
func (y *layout09) crossLinks(ctx context.Context, delta int, keys []Key) ([][]ragged.Endpoint, error) {
	f := y.links[delta]
	if f == nil {
		return nil, nil
	}
	var out [][]ragged.Endpoint
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
				return nil, err
			}
			for _, r := range recs {
				if f.duplicate && !Key(r[0].Chunk).equal(cellKeys[i]) {
					continue
				}
				out = append(out, r)
			}
		}
	}
	return out, nil
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
