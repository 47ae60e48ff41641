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
	if len(m.Fill) != 0 {
		// A cell not stored reads as the fill value: only an empty one
		// tells a listed cell that is missing from one holding bytes.
		return fail("fill_value %q, where a ZVF 0.9 chunk-grid array's unwritten cells are empty (\"\")", m.Fill)
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
		return fail("attributes: nonempty_chunks must be a list of chunk keys and chunk_grid_origin of integers: %v", zarr.JSONError(err))
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
		if err := y.listCells(ctx, g, family == "vertices"); err != nil {
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

// unlisted lists, sorted as strings, the stored cells of g that hold bytes
// but its nonempty_chunks does not name (none when the array has no such
// list: its cells were found by listing). A decentralised writer may leave
// the list stale (zvf-0.9-format §5.6); the server reads only what it
// names.
func (y *layout09) unlisted(ctx context.Context, g *gridArray) ([]string, error) {
	if !g.listed {
		return nil, nil
	}
	stored := &gridArray{family: g.family, arr: g.arr, origin: g.origin, grid: g.grid, chunk: g.chunk, inner: g.inner, present: map[string]bool{}}
	if err := y.listCells(ctx, stored, false); err != nil {
		return nil, err
	}
	var out []string
	for _, ks := range stored.cells {
		if g.present[ks] {
			continue
		}
		key, _ := ParseKey(ks)
		b, err := y.read(ctx, stored, key, ks)
		if err != nil {
			return nil, err
		}
		if len(b) > 0 {
			out = append(out, ks)
		}
	}
	sort.Strings(out)
	return out, nil
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
// chunk (each stored inner chunk of a shard) holds cells. dropEmpty leaves
// out the cells written empty, which are cells never written (§3.2: the
// reference's derive_nonempty_chunks drops them): the vertices cells found
// are the level's chunks, and an empty one is none. Only the stored pieces
// that may hold an empty cell are read: those of more than one cell, and
// those of one no larger than emptyCellMost.
func (y *layout09) listCells(ctx context.Context, g *gridArray, dropEmpty bool) error {
	l := y.l
	m := g.arr.Meta()
	prefix := join(l.path, g.family) + "/"
	var chunks [][]int64
	var sizes []int64
	err := l.s.st.Walk(ctx, prefix, func(key string, a storage.Attrs) error {
		rest := strings.TrimPrefix(key, prefix)
		if rest == "zarr.json" || strings.HasSuffix(rest, "/zarr.json") {
			return nil
		}
		c, ok := parseChunkKey(m.KeyEncoding, rest, len(m.Shape))
		if !ok {
			return nil
		}
		chunks, sizes = append(chunks, c), append(sizes, a.Size)
		return nil
	})
	if err != nil {
		return l.s.wrap(kindOf(err), l.n, g.family, "", err)
	}
	mayBeEmpty := func(cells []int64, size int64) bool {
		return dropEmpty && (prod64(cells) > 1 || size <= emptyCellMost)
	}
	for i, c := range chunks {
		if !g.chunkInGrid(c) {
			continue // no cell of the array: nothing to read, nor to add
		}
		if g.inner == nil {
			var elems [][]byte
			if mayBeEmpty(g.chunk, sizes[i]) {
				ch, err := g.arr.ReadChunk(ctx, c)
				if err != nil {
					return l.s.wrap(kindOf(err), l.n, g.family, Key(c).String(), err)
				}
				elems = ch.Elems
			}
			g.addBlock(c, g.chunk, nil, elems)
			continue
		}
		ix, err := g.arr.ReadShardIndex(ctx, c)
		if err != nil {
			return l.s.wrap(kindOf(err), l.n, g.family, "", err)
		}
		in := make([]int64, len(c))
		for {
			if n, ok := ix.StoredBytes(in); ok {
				var elems [][]byte
				if mayBeEmpty(g.inner, n) {
					ch, err := g.arr.ReadInner(ctx, ix, in)
					if err != nil {
						return l.s.wrap(kindOf(err), l.n, g.family, Key(c).String(), err)
					}
					elems = ch.Elems
				}
				g.addBlock(c, g.chunk, in, elems)
			}
			if !zarr.Advance(in, shardGrid(g.chunk, g.inner)) {
				break
			}
		}
	}
	return nil
}

// emptyCellMost bounds the stored size of a chunk (or inner chunk) of one
// empty cell: its vlen-bytes frame is 8 bytes, which the codecs a cell
// passes through (zstd, gzip, blosc, a crc32c) leave well under this.
// A larger piece of one cell holds bytes.
const emptyCellMost = 64

func prod64(v []int64) int64 {
	n := int64(1)
	for _, x := range v {
		n *= x
	}
	return n
}

// chunkInGrid reports whether Zarr chunk (shard) c holds a cell of the
// grid; dividing rather than multiplying, so no key overflows.
func (g *gridArray) chunkInGrid(c []int64) bool {
	for i := range c {
		if g.grid[i] == 0 || c[i] < 0 || c[i] > (g.grid[i]-1)/g.chunk[i] {
			return false
		}
	}
	return true
}

// addBlock marks present every cell of Zarr chunk c (of inner chunk in,
// when sharded) that lies inside the grid; with elems, the piece's cells
// as read (C order), only those holding bytes.
func (g *gridArray) addBlock(c, chunk, in []int64, elems [][]byte) {
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
	for e := 0; ; e++ { // e: the cell's place in the piece, C order as at advances
		key := make(Key, len(c))
		inside := true
		for i := range c {
			idx := lo[i] + at[i]
			inside = inside && idx < g.grid[i]
			key[i] = idx + g.origin[i]
		}
		if inside && (elems == nil || e < len(elems) && len(elems[e]) > 0) {
			g.add(key)
		}
		if !zarr.Advance(at, span) {
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
	b, err := y.read(ctx, g, key, ks)
	if err == nil && len(b) == 0 && family != "vertices" {
		// Only a cell found by listing reads empty here (read refuses a
		// listed one): unwritten and empty are one (§3.2), so it is as
		// absent as a cell not stored — no fragment index, no attribute
		// values — not bytes to decode. (Empty vertices cells were left out
		// of the level's chunks as it opened: listCells.)
		return nil, y.l.s.errf(ErrNotFound, y.l.n, family, ks, "%w", errMissing)
	}
	return b, err
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
	if len(c.Elems[e]) == 0 && l.s.watched {
		// A chunk (or shard) that is not stored reads as empty cells, but
		// this cell was listed when the level opened: a chunk missing now
		// is the store changing (or broken), never an empty cell.
		if _, err := l.s.st.Stat(ctx, g.arr.ChunkKey(outer)); err != nil {
			return nil, l.s.implied(err, l.n, g.family, ks)
		}
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
