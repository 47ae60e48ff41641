package zvftest

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/ragged"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zarr"
)

// To09Options vary the ZVF 0.9 store To09 writes.
type To09Options struct {
	// Duplicate writes delta-0 link families with store "duplicate" (a
	// copy of each cross-chunk record in every chunk it touches) instead
	// of "canonical".
	Duplicate bool
	// Pad puts the grid origin that many cells below the first chunk on
	// every axis, so every cell index differs from its chunk key.
	Pad int64
	// OmitNonempty leaves out nonempty_chunks (a reader then lists cells).
	OmitNonempty bool
	// Codecs follow vlen-bytes in every chunk-grid array's codec chain
	// (JSON list entries, e.g. `{"name":"zstd"}`).
	Codecs []string
}

// To09 rewrites the ZVF 0.6/0.7 store src as ZVF 0.9.0 (zvf-0.9-format)
// into dst: every per-chunk family becomes one chunk-grid array of
// variable-length cells, cross-chunk and cross-level links become
// links/<delta>/<offsets> families (undirected records placed in sorted
// order with a perm_idx, directed ones as written), object attributes
// plain arrays whose fill value marks absent rows, groups one
// variable-length array. Manifests are copied: their bytes did not
// change. It is how tests get the same data in both layouts; stores packed
// into __shard_ arrays, attribute-chunked levels and 0.6 object indexes
// are refused. Line geometries get no links/0 family: their 0.7 records
// hold fragment-local rows, and a 0.9 reader joins polylines through
// their manifests.
func To09(ctx context.Context, src storage.Store, dst storage.Writer, o To09Options) error {
	c := &conv{ctx: ctx, src: src, dst: dst, o: o, codecs: zarr.NewCodecs()}
	root, err := c.readJSON("zarr.json")
	if err != nil {
		return err
	}
	attrs, _ := root["attributes"].(map[string]any)
	zv, _ := attrs["zarr_vectors"].(map[string]any)
	if zv == nil {
		return fmt.Errorf("to09: root has no zarr_vectors attributes")
	}
	if v, _ := zv["zv_version"].(string); !strings.HasPrefix(v, "0.6") && !strings.HasPrefix(v, "0.7") {
		return fmt.Errorf("to09: zv_version %q is not 0.6 or 0.7", v)
	}
	if _, packed := attrs["shard_layout"]; packed {
		return fmt.Errorf("to09: stores packed into __shard_ arrays are not converted")
	}
	zv["zv_version"] = "0.9.0"
	if caps, _ := zv["format_capabilities"].([]any); len(caps) == 0 {
		delete(zv, "format_capabilities")
	}
	c.rootChunk = floats(zv["chunk_shape"])
	if b, _ := zv["bounds"].([]any); len(b) == 2 {
		c.bounds = [2][]float64{floats(b[0]), floats(b[1])}
	}
	geoms, _ := zv["geometry_types"].([]any)
	if len(geoms) > 0 {
		c.geom, _ = geoms[0].(string)
	}
	lst, err := src.List(ctx, "")
	if err != nil {
		return err
	}
	for _, p := range lst.Prefixes {
		name := strings.TrimSuffix(p, "/")
		if n, err := strconv.Atoi(name); err == nil && strconv.Itoa(n) == name {
			c.levels = append(c.levels, n)
		}
	}
	sort.Ints(c.levels)
	c.lv = map[int]*convLevel{}
	for _, n := range c.levels {
		if err := c.readLevel(n); err != nil {
			return err
		}
	}
	for _, n := range c.levels {
		if err := c.writeLevel(c.lv[n]); err != nil {
			return fmt.Errorf("to09: level %d: %w", n, err)
		}
	}
	root["attributes"] = attrs
	return c.putJSON("zarr.json", root)
}

type conv struct {
	ctx       context.Context
	src       storage.Store
	dst       storage.Writer
	o         To09Options
	codecs    *zarr.Codecs
	rootChunk []float64
	bounds    [2][]float64
	geom      string
	levels    []int
	lv        map[int]*convLevel
}

type convLevel struct {
	n      int
	path   string
	chunk  []float64 // chunk shape
	keys   [][]int64
	origin []int64
	shape  []int64
}

func floats(v any) []float64 {
	l, _ := v.([]any)
	out := make([]float64, len(l))
	for i, x := range l {
		out[i], _ = x.(float64)
	}
	return out
}

func (c *conv) readJSON(key string) (map[string]any, error) {
	b, err := storage.ReadAll(c.ctx, c.src, key, zarr.MaxMetadataBytes)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("to09: %s: %w", key, err)
	}
	return m, nil
}

// groupAttrs reads a group's attributes (empty when it has no zarr.json).
func (c *conv) groupAttrs(p string) (map[string]any, error) {
	m, err := c.readJSON(p + "/zarr.json")
	if errors.Is(err, storage.ErrNotFound) {
		return map[string]any{}, nil
	}
	if err != nil {
		return nil, err
	}
	a, _ := m["attributes"].(map[string]any)
	if a == nil {
		a = map[string]any{}
	}
	return a, nil
}

func (c *conv) putJSON(key string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return c.dst.Put(c.ctx, key, b)
}

func (c *conv) children(p string) ([]string, error) {
	lst, err := c.src.List(c.ctx, p+"/")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, q := range lst.Prefixes {
		q = strings.TrimSuffix(q, "/")
		out = append(out, q[strings.LastIndexByte(q, '/')+1:])
	}
	return out, nil
}

// blob is the bytes of a 0.7 per-chunk array (a 1-D uint8 array).
func (c *conv) blob(p string) ([]byte, error) {
	a, err := zarr.OpenArray(c.ctx, c.src, p, c.codecs)
	if err != nil {
		return nil, err
	}
	return a.ReadBytes(c.ctx)
}

func (c *conv) readLevel(n int) error {
	l := &convLevel{n: n, path: strconv.Itoa(n), chunk: c.rootChunk}
	meta, err := c.readJSON(l.path + "/zarr.json")
	if err != nil {
		return err
	}
	if a, _ := meta["attributes"].(map[string]any); a != nil {
		lm, _ := a["zarr_vectors_level"].(map[string]any)
		if cs := floats(lm["chunk_shape"]); len(cs) == len(c.rootChunk) {
			l.chunk = cs
		}
		if _, ok := lm["chunk_dims"]; ok {
			return fmt.Errorf("to09: level %d is attribute-chunked", n)
		}
	}
	if err := c.dst.Put(c.ctx, l.path+"/zarr.json", mustJSON(meta)); err != nil {
		return err
	}
	names, err := c.children(l.path + "/vertices")
	if err != nil {
		return err
	}
	d := len(c.rootChunk)
	lo, hi := make([]int64, d), make([]int64, d)
	for i := 0; i < d; i++ {
		lo[i], hi[i] = math.MaxInt64, math.MinInt64
		if len(c.bounds[0]) == d {
			lo[i] = int64(math.Floor(c.bounds[0][i] / l.chunk[i]))
			hi[i] = int64(math.Floor(c.bounds[1][i] / l.chunk[i]))
		}
	}
	for _, name := range names {
		k, ok := parseKey(name, d)
		if !ok {
			continue
		}
		l.keys = append(l.keys, k)
		for i := range k {
			lo[i], hi[i] = min(lo[i], k[i]), max(hi[i], k[i])
		}
	}
	l.origin, l.shape = make([]int64, d), make([]int64, d)
	for i := 0; i < d; i++ {
		if lo[i] > hi[i] {
			lo[i], hi[i] = 0, 0
		}
		l.origin[i] = lo[i] - c.o.Pad
		l.shape[i] = hi[i] - l.origin[i] + 1
	}
	c.lv[n] = l
	return nil
}

// parseKey is zvf.ParseKey of a key of d coordinates.
func parseKey(s string, d int) ([]int64, bool) {
	k, err := zvf.ParseKey(s)
	return k, err == nil && len(k) == d
}

func mustJSON(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err) // maps of JSON values always marshal
	}
	return b
}

// writeGrid writes one chunk-grid array: cells (chunk key → payload),
// attrs beside nonempty_chunks and chunk_grid_origin.
func (c *conv) writeGrid(l *convLevel, family string, attrs map[string]any, cells map[string][]byte) error {
	a := map[string]any{}
	for k, v := range attrs {
		a[k] = v
	}
	var nonempty []string
	for k, b := range cells {
		if len(b) > 0 {
			nonempty = append(nonempty, k)
		}
	}
	sort.Strings(nonempty)
	if !c.o.OmitNonempty {
		a["nonempty_chunks"] = append([]string{}, nonempty...)
	}
	if slices.ContainsFunc(l.origin, func(v int64) bool { return v != 0 }) {
		a["chunk_grid_origin"] = l.origin
	}
	ones := make([]int64, len(l.shape))
	for i := range ones {
		ones[i] = 1
	}
	codecs := `[{"name":"vlen-bytes","configuration":{}}` + strings.Join(append([]string{""}, c.o.Codecs...), ",") + `]`
	arr, err := c.putArray(join(l.path, family), l.shape, ones, "variable_length_bytes", `""`, codecs, a)
	if err != nil {
		return err
	}
	for _, k := range nonempty {
		key, _ := parseKey(k, len(l.shape))
		idx := make([]int64, len(key))
		for i := range key {
			idx[i] = key[i] - l.origin[i]
		}
		vt, _ := zarr.ParseDataType("variable_length_bytes")
		if err := arr.WriteChunk(c.ctx, c.dst, idx, &zarr.Chunk{Shape: ones, Type: vt, Elems: [][]byte{cells[k]}}); err != nil {
			return err
		}
	}
	return nil
}

func join(a, b string) string { return a + "/" + b }

// putArray writes an array's zarr.json and returns it for writing chunks.
func (c *conv) putArray(p string, shape, chunk []int64, dtype, fill, codecs string, attrs map[string]any) (*zarr.Array, error) {
	doc := fmt.Sprintf(`{"zarr_format":3,"node_type":"array","shape":%s,"data_type":%q,"chunk_grid":{"name":"regular","configuration":{"chunk_shape":%s}},"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},"fill_value":%s,"codecs":%s,"attributes":%s}`,
		mustJSON(shape), dtype, mustJSON(chunk), fill, codecs, mustJSON(attrs))
	node, err := zarr.ParseNode([]byte(doc))
	if err != nil {
		return nil, fmt.Errorf("to09: %s: %w", p, err)
	}
	if err := c.dst.Put(c.ctx, p+"/zarr.json", []byte(doc)); err != nil {
		return nil, err
	}
	return zarr.NewArray(c.dst, p, node.Array, c.codecs)
}

// family reads every chunk of a 0.7 per-chunk family.
func (c *conv) family(l *convLevel, family string) (map[string][]byte, map[string]any, error) {
	attrs, err := c.groupAttrs(join(l.path, family))
	if err != nil {
		return nil, nil, err
	}
	names, err := c.children(join(l.path, family))
	if err != nil {
		return nil, nil, err
	}
	cells := map[string][]byte{}
	for _, k := range names {
		if _, ok := parseKey(k, len(l.shape)); !ok {
			continue
		}
		b, err := c.blob(join(join(l.path, family), k))
		if err != nil {
			return nil, nil, err
		}
		cells[k] = b
	}
	return cells, attrs, nil
}

func zeroSegment(width, d int) string {
	if width == 1 {
		return "self"
	}
	z := strings.TrimSuffix(strings.Repeat("0.", d), ".")
	return strings.TrimSuffix(strings.Repeat(z+"_", width-1), "_")
}

func (c *conv) writeLevel(l *convLevel) error {
	d := len(l.shape)
	for _, f := range []string{"vertices", "vertex_fragments", "link_fragments"} {
		cells, attrs, err := c.family(l, f)
		if err != nil {
			return err
		}
		if len(cells) > 0 || f == "vertices" {
			if err := c.writeGrid(l, f, attrs, cells); err != nil {
				return err
			}
		}
	}
	for _, group := range []string{"vertex_attributes"} {
		names, err := c.children(join(l.path, group))
		if err != nil {
			return err
		}
		for _, n := range names {
			cells, attrs, err := c.family(l, group+"/"+n)
			if err != nil {
				return err
			}
			if err := c.writeGrid(l, group+"/"+n, attrs, cells); err != nil {
				return err
			}
		}
	}
	line := c.geom == "line" || c.geom == "polyline" || c.geom == "streamline"
	directed := line || c.geom == "skeleton"
	// links/<delta>: intra rows and the records of other chunks and levels.
	fams := map[int]*linkFam{}
	fam := func(delta, width int) *linkFam {
		f := fams[delta]
		if f == nil {
			f = &linkFam{delta: delta, width: width, cells: map[string]map[string][]int64{}, perms: map[string]map[string][]int64{}}
			fams[delta] = f
		}
		return f
	}
	if a, err := c.groupAttrs(join(l.path, "links/0")); err == nil && len(a) > 0 && !line {
		width := intOf(a["link_width"], 2)
		cells, _, err := c.family(l, "links/0")
		if err != nil {
			return err
		}
		f := fam(0, width)
		f.intra = cells
		for _, b := range cells {
			f.num += int64(len(b) / (8 * width))
		}
		names, err := c.children(join(l.path, "link_attributes"))
		if err != nil {
			return err
		}
		for _, n := range names {
			cells, attrs, err := c.family(l, "link_attributes/"+n+"/0")
			if err != nil {
				return err
			}
			attrs["offsets"] = zeroOffsets(width, d)
			if err := c.writeGrid(l, "link_attributes/"+n+"/0/"+zeroSegment(width, d), attrs, cells); err != nil {
				return err
			}
		}
	}
	deltas, err := c.children(join(l.path, "cross_chunk_links"))
	if err != nil {
		return err
	}
	for _, name := range deltas {
		delta, err := strconv.Atoi(strings.TrimPrefix(name, "+"))
		if err != nil || (delta == 0 && line) {
			continue
		}
		a, err := c.groupAttrs(join(l.path, "cross_chunk_links/"+name))
		if err != nil {
			return err
		}
		width, ndim := intOf(a["link_width"], 2), intOf(a["sid_ndim"], d)
		b, err := c.blob(join(l.path, "cross_chunk_links/"+name+"/data"))
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		recs, err := ragged.DecodeLinks(b, width, ndim, -1)
		if err != nil {
			return err
		}
		f := fam(delta, width)
		for _, r := range recs {
			if err := c.place(l, f, r, directed); err != nil {
				return err
			}
		}
	}
	// 0.7 cross-level pairs between the same chunk coords at both levels.
	for _, name := range mustChildren(c, join(l.path, "links")) {
		delta, err := strconv.Atoi(strings.TrimPrefix(name, "+"))
		if err != nil || delta == 0 {
			continue
		}
		cells, _, err := c.family(l, "links/"+name)
		if err != nil {
			return err
		}
		f := fam(delta, 2)
		for k, b := range cells {
			key, _ := parseKey(k, d)
			rows, err := ragged.DecodeBlob(b, 2)
			if err != nil {
				return err
			}
			for i := 0; i+1 < len(rows); i += 2 {
				r := []ragged.Endpoint{{Chunk: key, Row: rows[i]}, {Chunk: key, Row: rows[i+1]}}
				if err := c.place(l, f, r, true); err != nil {
					return err
				}
			}
		}
	}
	for _, f := range fams {
		if err := c.writeLinks(l, f, directed); err != nil {
			return err
		}
	}
	if err := c.copyTree(join(l.path, "object_index")); err != nil {
		return err
	}
	if err := c.objectAttributes(l); err != nil {
		return err
	}
	return c.groups(l)
}

func mustChildren(c *conv, p string) []string {
	out, _ := c.children(p)
	return out
}

func intOf(v any, dflt int) int {
	if f, ok := v.(float64); ok && f != 0 {
		return int(f)
	}
	return dflt
}

func zeroOffsets(width, d int) [][]int64 {
	out := make([][]int64, width-1)
	for i := range out {
		out[i] = make([]int64, d)
	}
	return out
}

// linkFam collects one links/<delta> family: per segment, per source
// cell, the rows (stored order) and their perm_idx.
type linkFam struct {
	delta, width int
	intra        map[string][]byte // delta 0: flat rows per chunk, as 0.7 stored them
	cells        map[string]map[string][]int64
	perms        map[string]map[string][]int64
	num, phys    int64
}

// place stores one record (endpoints in input order): undirected records
// sorted by (chunk, row) with the permutation's Lehmer code; with
// Duplicate, a copy led by each distinct chunk.
func (c *conv) place(l *convLevel, f *linkFam, rec []ragged.Endpoint, directed bool) error {
	w := len(rec)
	f.num++
	var placements [][]int // each: stored position i holds input endpoint σ[i]
	ident := make([]int, w)
	for i := range ident {
		ident[i] = i
	}
	switch {
	case f.delta != 0 || (directed && !c.o.Duplicate):
		placements = [][]int{ident}
	case c.o.Duplicate:
		var seen []string
		for i, ep := range rec {
			ks := zvf.Key(ep.Chunk).String()
			if slices.Contains(seen, ks) {
				continue
			}
			seen = append(seen, ks)
			sigma := []int{i}
			for j := range rec {
				if j != i {
					sigma = append(sigma, j)
				}
			}
			placements = append(placements, sigma)
		}
	default:
		sigma := slices.Clone(ident)
		slices.SortStableFunc(sigma, func(a, b int) int {
			if c := slices.Compare(rec[a].Chunk, rec[b].Chunk); c != 0 {
				return c
			}
			return cmp.Compare(rec[a].Row, rec[b].Row)
		})
		placements = [][]int{sigma}
	}
	hasPerm := f.delta == 0 && (c.o.Duplicate || !directed)
	for _, sigma := range placements {
		src := rec[sigma[0]].Chunk
		anchor := src
		if f.delta != 0 {
			t := c.lv[l.n+f.delta]
			if t == nil {
				return fmt.Errorf("links to missing level %d", l.n+f.delta)
			}
			anchor = make([]int64, len(src))
			for i := range src {
				rl, rt := int64(math.Round(l.chunk[i]/c.rootChunk[i])), int64(math.Round(t.chunk[i]/c.rootChunk[i]))
				anchor[i] = int64(math.Floor(float64(src[i]*rl) / float64(rt)))
			}
		}
		var segs []string
		row := make([]int64, 0, w)
		for i, in := range sigma {
			ep := rec[in]
			row = append(row, ep.Row)
			if i == 0 {
				continue
			}
			comps := make([]string, len(ep.Chunk))
			for k := range ep.Chunk {
				comps[k] = deltaName(ep.Chunk[k] - anchor[k])
			}
			segs = append(segs, strings.Join(comps, "."))
		}
		seg := strings.Join(segs, "_")
		if w == 1 {
			seg = "self"
		}
		ks := zvf.Key(src).String()
		if f.cells[seg] == nil {
			f.cells[seg], f.perms[seg] = map[string][]int64{}, map[string][]int64{}
		}
		f.cells[seg][ks] = append(f.cells[seg][ks], row...)
		if hasPerm {
			f.perms[seg][ks] = append(f.perms[seg][ks], ragged.LehmerCode(sigma))
		}
		f.phys++
	}
	return nil
}

func deltaName(v int64) string {
	if v > 0 {
		return "+" + strconv.FormatInt(v, 10)
	}
	return strconv.FormatInt(v, 10)
}

func (c *conv) writeLinks(l *convLevel, f *linkFam, directed bool) error {
	d := len(l.shape)
	name := deltaName(int64(f.delta))
	if f.delta == 0 {
		name = "0"
	}
	store := "canonical"
	if c.o.Duplicate && f.delta == 0 {
		store = "duplicate"
	}
	intra := int64(0)
	for _, b := range f.intra {
		intra += int64(len(b) / (8 * f.width))
	}
	if err := c.putJSON(join(l.path, "links/"+name+"/zarr.json"), map[string]any{"zarr_format": 3, "node_type": "group", "attributes": map[string]any{
		"zv_array": "links_family", "level_delta": f.delta, "link_width": f.width, "sid_ndim": d, "directed": directed || f.delta != 0,
		"store": store, "num_links": f.num, "num_physical_records": f.phys + intra}}); err != nil {
		return err
	}
	if f.intra != nil {
		seg := zeroSegment(f.width, d)
		attrs := map[string]any{"zv_array": "links", "dtype": "int64", "offsets": zeroOffsets(f.width, d), "has_perm": false, "link_width": f.width, "level_delta": 0}
		if err := c.writeGrid(l, "links/0/"+seg, attrs, f.intra); err != nil {
			return err
		}
	}
	for seg, cells := range f.cells {
		hasPerm := len(f.perms[seg]) > 0
		var offsets [][]int64
		if seg != "self" {
			for _, o := range strings.Split(seg, "_") {
				var comps []int64
				for _, s := range strings.Split(o, ".") {
					v, _ := strconv.ParseInt(strings.TrimPrefix(s, "+"), 10, 64)
					comps = append(comps, v)
				}
				offsets = append(offsets, comps)
			}
		}
		enc := map[string][]byte{}
		for ks, rows := range cells {
			var perms []int64
			if hasPerm {
				perms = f.perms[seg][ks]
			}
			b, err := ragged.EncodeLinkCell(rows, f.width, perms, false)
			if err != nil {
				return err
			}
			enc[ks] = b
		}
		attrs := map[string]any{"zv_array": "links", "dtype": "int64", "offsets": offsets, "has_perm": hasPerm, "link_width": f.width, "level_delta": f.delta}
		if err := c.writeGrid(l, "links/"+name+"/"+seg, attrs, enc); err != nil {
			return err
		}
	}
	return nil
}

// copyTree copies every object under p as it is.
func (c *conv) copyTree(p string) error {
	return c.src.Walk(c.ctx, p+"/", func(key string, _ storage.Attrs) error {
		b, err := storage.ReadAll(c.ctx, c.src, key, 1<<30)
		if err != nil {
			return err
		}
		return c.dst.Put(c.ctx, key, b)
	})
}

// objectAttributes: <n>/data (+ present_mask) becomes the array <n>, whose
// fill value (NaN, the type's minimum or maximum) marks absent rows.
func (c *conv) objectAttributes(l *convLevel) error {
	names, err := c.children(join(l.path, "object_attributes"))
	if err != nil {
		return err
	}
	for _, n := range names {
		p := join(l.path, "object_attributes/"+n)
		a, err := c.groupAttrs(p)
		if err != nil {
			return err
		}
		// 0.7 keeps the values as a uint8 blob; the group names their type
		// and shape, which the 0.9 array declares itself.
		raw, err := c.blob(p + "/data")
		if err != nil {
			return err
		}
		dtName, _ := a["dtype"].(string)
		dt, err := zarr.ParseDataType(dtName)
		if err != nil {
			return fmt.Errorf("to09: %s: %w", p, err)
		}
		var shape []int64
		for _, v := range floats(a["shape"]) {
			shape = append(shape, int64(v))
		}
		if ch := intOf(a["num_channels"], 1); ch > 1 && len(shape) == 1 {
			shape = append(shape, int64(ch))
		}
		fill := `"NaN"`
		switch dt.Kind {
		case zarr.KindInt:
			fill = strconv.FormatInt(-1<<(8*dt.Size-1), 10)
		case zarr.KindUint:
			fill = strconv.FormatUint(math.MaxUint64>>(64-8*dt.Size), 10)
		}
		fb, err := zarr.FillBytes(dt, json.RawMessage(fill))
		if err != nil {
			return err
		}
		if hm, _ := a["has_present_mask"].(bool); hm {
			mask, err := c.blob(p + "/present_mask")
			if err != nil {
				return err
			}
			row := len(raw) / max(len(mask), 1)
			for r, m := range mask {
				if m == 0 {
					for off := r * row; off < (r+1)*row; off += dt.Size {
						copy(raw[off:], fb)
					}
				}
			}
		}
		attrs := map[string]any{"zv_array": "object_attribute", "name": n, "dtype": dt.Name, "shape": shape, "fill_sentinel_meaning": "absent"}
		out, err := c.putArray(p, shape, shape, dt.Name, fill, `[{"name":"bytes","configuration":{"endian":"little"}}]`, attrs)
		if err != nil {
			return err
		}
		if err := out.WriteChunk(c.ctx, c.dst, make([]int64, len(shape)), &zarr.Chunk{Shape: shape, Type: dt, Data: raw}); err != nil {
			return err
		}
	}
	return nil
}

// groups: data + byte offsets become one variable-length array.
func (c *conv) groups(l *convLevel) error {
	p := join(l.path, "groups")
	data, err := c.blob(p + "/data")
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	offs, err := c.blob(p + "/offsets")
	if err != nil {
		return err
	}
	g, err := ragged.DecodeGroups(data, offs)
	if err != nil {
		return err
	}
	elems := make([][]byte, g.Len())
	for i := range elems {
		for _, m := range g.Members(i) {
			elems[i] = binary.LittleEndian.AppendUint64(elems[i], uint64(m))
		}
	}
	n := int64(max(len(elems), 1))
	arr, err := c.putArray(p, []int64{int64(len(elems))}, []int64{n}, "variable_length_bytes", `""`, `[{"name":"vlen-bytes","configuration":{}}]`,
		map[string]any{"zv_array": "groups", "num_groups": len(elems)})
	if err != nil || len(elems) == 0 {
		return err
	}
	vt, _ := zarr.ParseDataType("variable_length_bytes")
	return arr.WriteChunk(c.ctx, c.dst, []int64{0}, &zarr.Chunk{Shape: []int64{n}, Type: vt, Elems: elems})
}
