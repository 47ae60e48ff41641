package zvf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf/cql2"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zarr"
)

// Level is one resolution level of a store.
type Level struct {
	s          *Store
	n          int
	path       string
	meta       levelMeta
	info       LevelInfo
	chunkShape []float64
	binShape   []float64
	keyArity   int // dims, or dims+1 on attribute-chunked levels
	keys       []Key
	keySet     map[string]int // key string -> index into keys
	grid       *keyGrid       // keys by cell (candidates); nil: scan keys
	vkeys      []string       // cache key of each chunk's vertices, built once
	// seen is what level=auto learnt of each chunk once its vertices were
	// in the cache (see chunkSeen); 0 until then.
	seen []atomic.Uint64
	// listed checks the chunks listed at open against the level's
	// vertex_count once all were seen (checkListing).
	listed listCheck
	// holes asks a box answer's unlisted cells whether they are there
	// (checkHoles).
	holes holeCheck
	// seenGen counts the changes to seen; sums is seen summed over the key
	// grid as of one generation (see seenSums), nil until level=auto asks.
	seenGen atomic.Uint64
	sums    atomic.Pointer[seenSums]
	// vrefs find each chunk's cached vertices again without hashing its
	// vkeys entry (peekVerts); nil until found.
	vrefs  []atomic.Pointer[cache.Ref]
	draco  bool
	vattrs []*attrMeta
	lattrs []*linkAttrMeta // per-edge attributes of the delta-0 links
	// lunserved: link attributes of a type the server does not read, by
	// name, with why (ErrUnsupported); left out of lattrs.
	lunserved    map[string]error
	oattrs       []*objAttrMeta
	objects      *objectIndex // nil: no object index
	numGroups    int64
	groupRanges  map[int64][2]int64 // 0.9 range groups: [start, stop) of member ids
	binPrefilter bool
	bpc          []int64 // bins per chunk (binPrefilter only)
	vdt          zarr.DataType
	// stored lists the arrays read on first use that were there when the
	// level opened (watched stores only; see recordStored).
	stored map[string]bool

	// lay reads the level's cells; the link fields are what it found.
	lay        layout
	intra      string // family of the links among a chunk's own rows ("" none)
	intraPerm  bool   // intra rows carry a perm_idx (a 0.9 has_perm array)
	linkWidth  int    // endpoints per delta-0 link; 0 when there are none
	linkDeltas []int  // deltas with cross-chunk (0.7) or any (0.9) links, sorted

	// nodes memoises zarr.json documents while the level opens (nil after).
	nodes   map[string]nodeMemo
	inverse inverseOnce
	// table: the level's table when small (see levelTable).
	table tableState
	// akeys memoises each filtered attribute's blob cache key per chunk
	// (attrKeys).
	akeysMu sync.Mutex
	akeys   map[string][]string
	// schema is the level's queryables, worked out once (Queryables).
	schemaOnce sync.Once
	schema     cql2.Schema
}

type attrMeta struct {
	AttrInfo
	dt       zarr.DataType
	nullCode *int64
	// channelsKnown: Channels is the level's, from channel_names or from
	// the chunk sampleChannels read; every chunk's rows must hold that
	// many. Else each chunk's bytes tell (and no chunk had rows and the
	// attribute when the level opened).
	channelsKnown bool
}

type objAttrMeta struct {
	AttrInfo
	dt          zarr.DataType
	shape       []int64
	presentMask bool
	// plain: the attribute is the array object_attributes/<name> itself,
	// whose fill value marks absent rows (ZVF 0.9); else <name>/data with
	// an optional present_mask.
	plain bool
}

type objectIndex struct {
	num    int64 // manifest rows
	ndim   int
	legacy bool   // 0.6: object_index/data + offsets
	layout string // the object_index layout attribute
	// byID: rows are not object ids; object_index/object_ids maps them
	// (vlen_manifests_v2).
	byID bool
}

func (s *Store) openLevel(ctx context.Context, n int) (*Level, error) {
	l := &Level{s: s, n: n, path: strconv.Itoa(n), nodes: map[string]nodeMemo{}}
	defer func() { l.nodes = nil }()
	l.lay = s.newLayout(l)
	raw, err := s.readGroupAttrs(ctx, l.path)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return nil, s.wrap(kindOf(err), n, "", "", fmt.Errorf("level metadata: %w", err))
	}
	if raw != nil {
		var a struct {
			L *levelMeta `json:"zarr_vectors_level"`
		}
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, s.errf(ErrCorrupt, n, "", "", "level attributes: %v", zarr.JSONError(err))
		}
		if a.L != nil {
			l.meta = *a.L
		}
	}
	if l.meta.Level != nil && *l.meta.Level != n {
		return nil, s.errf(ErrCorrupt, n, "", "", "level metadata says level %d", *l.meta.Level)
	}
	d := s.dims
	l.chunkShape = s.root.chunkShape
	if cs := l.meta.ChunkShape; cs != nil {
		if len(cs) != d {
			return nil, s.errf(ErrCorrupt, n, "", "", "chunk_shape %v does not have %d axes", cs, d)
		}
		for _, c := range cs {
			if !(c > 0) || math.IsInf(c, 0) {
				return nil, s.errf(ErrCorrupt, n, "", "", "chunk_shape %v must be positive", cs)
			}
		}
		l.chunkShape = cs
	}
	l.binShape = l.chunkShape
	if n == 0 && len(s.root.baseBin) == d {
		l.binShape = s.root.baseBin
	}
	var ratio []int
	if ds, ok := s.root.datasets[l.path]; ok && n > 0 {
		if len(ds[1]) == d {
			bs := make([]float64, d)
			for i, t := range ds[1] {
				bs[i] = 2 * t
			}
			l.binShape = bs
		}
		if len(ds[0]) == d {
			// A ratio is a whole number from 1 on; a scale that is none
			// (1e300, negative) leaves it out: its int conversion is
			// undefined (MinInt64 on amd64).
			ratio = make([]int, d)
			for i, v := range ds[0] {
				r := math.Round(v)
				if !(r >= 1 && r <= 1<<30) {
					ratio = nil
					break
				}
				ratio[i] = int(r)
			}
		}
	}
	l.keyArity = d
	if l.meta.ChunkAttrName != "" || len(l.meta.ChunkDims) == d+1 {
		l.keyArity = d + 1
	}
	if err := l.readVerticesMeta(ctx); err != nil {
		return nil, err
	}
	if err := l.readAttributes(ctx); err != nil {
		return nil, err
	}
	if err := l.readObjects(ctx); err != nil {
		return nil, err
	}
	if err := l.lay.open(ctx); err != nil {
		return nil, err
	}
	if err := l.recordStored(ctx); err != nil {
		return nil, err
	}
	l.setBinPrefilter() // before setKeys: it names the chunks' cache entries
	l.setKeys(l.lay.chunks())
	if err := l.sampleChannels(ctx); err != nil {
		return nil, err
	}
	if err := l.readLinkAttributes(ctx); err != nil {
		return nil, err
	}
	sort.Ints(l.linkDeltas)
	l.info = LevelInfo{
		Level: n, ChunkShape: l.chunkShape, BinShape: l.binShape, BinRatio: ratio, VertexCount: l.meta.VertexCount,
		GroupCount: l.numGroups, ChunkCount: len(l.keys), Coarsening: l.meta.CoarseningMethod,
		ObjectSparsity: l.meta.ObjectSparsity, PreservesObjectIDs: l.meta.PreservesObjectIDs,
		SharedFragments: l.meta.SharedFragments, ChunkDims: l.meta.ChunkDims, ChunkAttribute: l.meta.ChunkAttrName,
		VertexAttributes: []AttrInfo{}, ObjectAttributes: []AttrInfo{},
		ChunkBounds: chunkBounds(l.keys, l.keyArity, l.s.dims, l.chunkShape),
	}
	if l.objects != nil {
		l.info.ObjectCount = l.objects.num
		l.info.ObjectIndexLayout = l.objects.layout
	}
	for _, a := range l.vattrs {
		l.info.VertexAttributes = append(l.info.VertexAttributes, a.AttrInfo)
	}
	for _, a := range l.oattrs {
		l.info.ObjectAttributes = append(l.info.ObjectAttributes, a.AttrInfo)
	}
	l.info.LinkDeltas = l.linkDeltas
	for _, a := range l.lattrs {
		l.info.LinkAttributes = append(l.info.LinkAttributes, a.AttrInfo)
	}
	return l, nil
}

// N is the level number.
func (l *Level) N() int { return l.n }

// Info describes the level (do not modify).
func (l *Level) Info() *LevelInfo { return &l.info }

// Keys lists the level's chunk keys, sorted (do not modify).
func (l *Level) Keys() []Key { return l.keys }

// Dims is the number of coordinate axes.
func (l *Level) Dims() int { return l.s.dims }

// VertexDType is the data type of this level's vertices (coarse levels
// may differ from level 0: the reference writes them as float32).
func (l *Level) VertexDType() string { return l.vdt.Name }

type zvArrayAttrs struct {
	ZVArray      string              `json:"zv_array"`
	DType        string              `json:"dtype"`
	Encoding     string              `json:"encoding"`
	ChannelNames []string            `json:"channel_names"`
	Categories   []string            `json:"categories"`
	FillValue    *int64              `json:"_FillValue"`
	LinkWidth    int                 `json:"link_width"`
	NumLinks     *int64              `json:"num_links"`
	SidNdim      int                 `json:"sid_ndim"`
	NumObjects   *int64              `json:"num_objects"`
	Layout       string              `json:"layout"`
	Shape        []int64             `json:"shape"`
	HasMask      bool                `json:"has_present_mask"`
	NumGroups    *int64              `json:"num_groups"`
	GroupRanges  map[string][2]int64 `json:"group_ranges"`
	Name         string              `json:"name"`
	RowShape     []int64             `json:"row_shape"`
	Extra        json.RawMessage     `json:"-"`
}

// arrayAttrs reads a ZVF array's (or array group's) attributes; a missing
// zarr.json gives empty attributes (intermediate groups often lack one).
func (l *Level) arrayAttrs(ctx context.Context, array string) (*zvArrayAttrs, bool, error) {
	node, err := l.node(ctx, array)
	if errors.Is(err, storage.ErrNotFound) {
		return &zvArrayAttrs{}, false, nil
	}
	if err != nil {
		return nil, false, l.s.wrap(kindOf(err), l.n, array, "", err)
	}
	var a zvArrayAttrs
	if err := json.Unmarshal(node.Attributes, &a); err != nil {
		return nil, false, l.s.errf(ErrCorrupt, l.n, array, "", "attributes: %v", zarr.JSONError(err))
	}
	return &a, true, nil
}

func (l *Level) children(ctx context.Context, array string) ([]string, error) {
	lst, err := l.s.st.List(ctx, join(l.path, array)+"/")
	if err != nil {
		return nil, l.s.wrap(nil, l.n, array, "", err)
	}
	out := make([]string, 0, len(lst.Prefixes))
	for _, p := range lst.Prefixes {
		p = strings.TrimSuffix(p, "/")
		out = append(out, p[strings.LastIndexByte(p, '/')+1:])
	}
	return out, nil
}

// arrays lists the child arrays of array: the folders below it that hold
// a zarr.json, as the reference reader takes them. A folder without one —
// left empty by a crashed writer or a delete that keeps folders, or an
// object store's "folder/" marker — is not an array.
func (l *Level) arrays(ctx context.Context, array string) ([]string, error) {
	ps, err := storage.FoldersHolding(ctx, l.s.st, join(l.path, array)+"/", "zarr.json")
	if err != nil {
		return nil, l.s.wrap(kindOf(err), l.n, array, "", err)
	}
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		p = strings.TrimSuffix(p, "/")
		out = append(out, p[strings.LastIndexByte(p, '/')+1:])
	}
	return out, nil
}

// members lists the attributes (or offsets segments) below family: in
// ZVF 0.9 each is an array, so only the folders holding a zarr.json (a
// folder a crashed writer left, or a "folder/" marker, is none); in 0.6/0.7
// each is a group of per-chunk arrays, which may be implicit (no zarr.json).
func (l *Level) members(ctx context.Context, family string) ([]string, error) {
	if l.s.format == format09 {
		return l.arrays(ctx, family)
	}
	return l.children(ctx, family)
}

// valueArray reads the attributes of array, a per-vertex array, and its
// value type (float32 when the attributes name none).
func (l *Level) valueArray(ctx context.Context, array string) (*zvArrayAttrs, zarr.DataType, error) {
	a, _, err := l.arrayAttrs(ctx, array)
	if err != nil {
		return nil, zarr.DataType{}, err
	}
	dtName := a.DType
	if dtName == "" {
		dtName = "float32"
	}
	dt, err := numpyDType(dtName)
	if err != nil {
		return nil, zarr.DataType{}, l.s.errf(ErrUnsupported, l.n, array, "", "%v", err)
	}
	return a, dt, nil
}

func (l *Level) readVerticesMeta(ctx context.Context) error {
	a, dt, err := l.valueArray(ctx, "vertices")
	if err != nil {
		return err
	}
	// Coarse levels are float32 even over float64 data: each level keeps
	// its own type; the store's is level 0's (set by Open, since levels
	// open concurrently).
	l.vdt = dt
	l.draco = a.Encoding == "draco"
	return nil
}

// setKeys records the level's chunks (sorted) and their cache keys. On a
// bin-prefiltered level box matching keeps its own entry, whose bins may
// come from the rows rather than the fragment index (verticesAt).
func (l *Level) setKeys(keys []Key) {
	l.keys = keys
	l.keySet = make(map[string]int, len(l.keys))
	l.grid = newKeyGrid(l.keys, l.keyArity, l.s.dims)
	l.vkeys = make([]string, len(l.keys))
	l.seen = make([]atomic.Uint64, len(l.keys))
	l.vrefs = make([]atomic.Pointer[cache.Ref], len(l.keys))
	kind := "verts"
	if l.binPrefilter {
		kind = "vbins"
	}
	for i, k := range l.keys {
		ks := k.String()
		l.keySet[ks] = i
		l.vkeys[i] = l.cacheKey(kind, ks)
	}
}

// chunkBounds is the box of the grid cells the keys name (chunk c of an
// axis covers [c × shape, (c+1) × shape), as candidates finds them), or
// nil when there are no keys or a corner is not a finite number.
func chunkBounds(keys []Key, arity, d int, shape []float64) [][]float64 {
	if len(keys) == 0 || d < 1 || arity < d || len(shape) < d {
		return nil
	}
	off := arity - d
	lo, hi := make([]float64, d), make([]float64, d)
	for j, k := range keys {
		if len(k) != arity {
			return nil
		}
		for a := range d {
			c := float64(k[off+a])
			if j == 0 || c < lo[a] {
				lo[a] = c
			}
			if j == 0 || c > hi[a] {
				hi[a] = c
			}
		}
	}
	for a := range d {
		lo[a] *= shape[a]
		hi[a] = (hi[a] + 1) * shape[a]
		if math.IsInf(lo[a], 0) || math.IsInf(hi[a], 0) || math.IsNaN(lo[a]) || math.IsNaN(hi[a]) {
			return nil
		}
	}
	return [][]float64{lo, hi}
}

func (l *Level) readAttributes(ctx context.Context) error {
	names, err := l.members(ctx, "vertex_attributes")
	if err != nil {
		return err
	}
	for _, name := range names {
		a, dt, err := l.valueArray(ctx, "vertex_attributes/"+name)
		if err != nil {
			return err
		}
		m := &attrMeta{AttrInfo: AttrInfo{Name: name, DType: dt.Name, Channels: 1}, dt: dt}
		if len(a.ChannelNames) > 0 {
			m.Channels = len(a.ChannelNames)
			m.channelsKnown = true
		}
		if a.Encoding == "dictionary" {
			m.Categories = a.Categories
			if m.Categories == nil {
				m.Categories = []string{}
			}
			m.nullCode = a.FillValue
		}
		l.vattrs = append(l.vattrs, m)
	}
	return nil
}

// maxObjectChannels bounds the values of one object attribute row, as
// the writer does (zvf/writer maxChannels).
const maxObjectChannels = 1 << 16

// maxChannelSamples bounds the chunks sampleChannels reads at a level's
// open.
const maxChannelSamples = 8

// sampleChannels works out how many values a row holds of each vertex
// attribute that names no channel_names (the reference's graph, skeleton
// and mesh writers name none, nor its points writer for one value a row)
// from the first chunk with rows and the attribute: the descriptor,
// Neuroglancer's skeleton info and every answer's attribute_info say it
// before any chunk of theirs is read, and a client sizes the attribute
// blocks by it. The bytes are read past the cache (and the level's record
// of chunks seen), so the level opens as it did and a request reads what
// it did; a chunk that is corrupt or lacks the attribute is passed over
// (the requests that read it fail or go without, as before). From then
// on every chunk must hold that many (attrRows).
func (l *Level) sampleChannels(ctx context.Context) error {
	var open []*attrMeta
	for _, a := range l.vattrs {
		if !a.channelsKnown {
			open = append(open, a)
		}
	}
	if l.draco {
		return nil // no vertex rows to count
	}
	for i := 0; i < len(l.keys) && i < maxChannelSamples && len(open) > 0; i++ {
		key := l.keys[i]
		ks := key.String()
		data, err := l.lay.cell(ctx, "vertices", key, ks)
		var cv *chunkVerts
		if err == nil {
			cv, err = l.vertexRows(data, ks)
		}
		switch {
		case errors.Is(err, ErrCorrupt), errors.Is(err, ErrNotFound):
			continue
		case err != nil:
			return err
		case cv.rows == 0:
			continue
		}
		rest := open[:0]
		for _, a := range open {
			b, err := l.lay.cell(ctx, "vertex_attributes/"+a.Name, key, ks)
			ch := 0
			if err == nil {
				_, ch, err = l.attrRows(a, key, cv.rows, b)
			}
			switch {
			case errors.Is(err, ErrNotFound), errors.Is(err, ErrCorrupt), err == nil && ch == 0:
				rest = append(rest, a) // another chunk may tell
			case err != nil:
				return err
			default:
				a.Channels, a.channelsKnown = ch, true
			}
		}
		open = rest
	}
	return nil
}

func (l *Level) readObjects(ctx context.Context) error {
	a, ok, err := l.arrayAttrs(ctx, "object_index")
	if err != nil {
		return err
	}
	if ok || a.NumObjects != nil {
		oi := &objectIndex{ndim: a.SidNdim, legacy: a.Layout == "", layout: a.Layout}
		if a.NumObjects != nil {
			oi.num = *a.NumObjects
		}
		if oi.ndim == 0 {
			oi.ndim = l.keyArity
		}
		if oi.num < 0 || oi.ndim < 1 || oi.ndim > 32 {
			return l.s.errf(ErrCorrupt, l.n, "object_index", "", "num_objects %d, sid_ndim %d", oi.num, oi.ndim)
		}
		switch a.Layout {
		case "vlen_manifests_v1":
		case "vlen_manifests_v2":
			oi.byID = true
		case "":
			if l.s.format == format09 {
				return l.s.errf(ErrCorrupt, l.n, "object_index", "", "no layout attribute (ZVF 0.9 writes vlen_manifests_v1 or vlen_manifests_v2)")
			}
		default:
			return l.s.errf(ErrUnsupported, l.n, "object_index", "", "layout %q is not read; this server reads vlen_manifests_v1 (row = object id) and vlen_manifests_v2 (ids in object_index/object_ids)", a.Layout)
		}
		l.objects = oi
	}
	names, err := l.members(ctx, "object_attributes")
	if err != nil {
		return err
	}
	for _, name := range names {
		a, _, err := l.arrayAttrs(ctx, "object_attributes/"+name)
		if err != nil {
			return err
		}
		dt, err := numpyDType(a.DType)
		if err != nil {
			return l.s.errf(ErrUnsupported, l.n, "object_attributes/"+name, "", "%v", err)
		}
		ch := int64(1)
		if len(a.Shape) == 2 {
			ch = a.Shape[1]
		}
		// At most maxObjectChannels values a row (the writer's bound):
		// a row's size, and rows × it, then never overflow, and no
		// encoder sizes a list from a count the bytes cannot back.
		if len(a.Shape) == 0 || len(a.Shape) > 2 || ch < 1 || ch > maxObjectChannels || a.Shape[0] < 0 {
			return l.s.errf(ErrCorrupt, l.n, "object_attributes/"+name, "", "shape %v (at most %d channels)", a.Shape, maxObjectChannels)
		}
		l.oattrs = append(l.oattrs, &objAttrMeta{AttrInfo: AttrInfo{Name: name, DType: dt.Name, Channels: int(ch)}, dt: dt, shape: a.Shape, presentMask: a.HasMask, plain: l.s.format == format09})
	}
	g, ok, err := l.arrayAttrs(ctx, "groups")
	if err != nil {
		return err
	}
	for k, r := range g.GroupRanges {
		id, err := strconv.ParseInt(k, 10, 64)
		if err != nil {
			return l.s.errf(ErrCorrupt, l.n, "groups", "", "group_ranges key %q is not a group id", k)
		}
		if l.groupRanges == nil {
			l.groupRanges = map[int64][2]int64{}
		}
		l.groupRanges[id] = r
	}
	if ok && g.NumGroups != nil {
		l.numGroups = *g.NumGroups
	}
	return nil
}

func parseDelta(s string) (int, bool) {
	if s == "0" {
		return 0, true
	}
	if len(s) < 2 || (s[0] != '+' && s[0] != '-') {
		return 0, false
	}
	// As the format writes it: no leading zeros or second sign, so two
	// names never mean one delta.
	v, err := strconv.Atoi(s[1:])
	if err != nil || v <= 0 || strconv.Itoa(v) != s[1:] {
		return 0, false
	}
	if s[0] == '-' {
		v = -v
	}
	return v, true
}

func deltaName(d int) string {
	switch {
	case d == 0:
		return "0"
	case d > 0:
		return "+" + strconv.Itoa(d)
	}
	return strconv.Itoa(d)
}

// setBinPrefilter enables the bin shortcut only where the layout
// guarantees fragment = bin: a level-0 point cloud with no object index
// and more than one bin per chunk (zvf-format §3.4).
func (l *Level) setBinPrefilter() {
	if l.n != 0 || l.objects != nil || l.s.geom != "point_cloud" || len(l.s.info.GeometryTypes) != 1 || l.keyArity != l.s.dims {
		return
	}
	bpc := make([]int64, l.s.dims)
	p := int64(1)
	for i := range bpc {
		r := math.Round(l.chunkShape[i] / l.binShape[i])
		if r < 1 || r > 1<<16 || math.Abs(r*l.binShape[i]-l.chunkShape[i]) > 1e-9*l.chunkShape[i] {
			return
		}
		bpc[i] = int64(r)
		p *= bpc[i]
	}
	if p <= 1 || p > 1<<20 {
		return
	}
	l.binPrefilter, l.bpc = true, bpc
}
