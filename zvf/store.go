package zvf

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/cache/freelist"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zarr"
)

// Options configure Open.
type Options struct {
	Name        string       // the store's name in errors and cache keys
	Cache       Cache        // nil: no caching
	Codecs      *zarr.Codecs // shared codec state; nil: a private one
	Concurrency int          // parallel chunk reads per query (default 8)
	Logger      *slog.Logger

	gen          uint64 // cache generation, set by Handle
	revisionSeed string // what identifies the revision beyond its info, set by Handle
	// watched: the store may change while it is served (a watching
	// Handle opens it). Open then records what the version has, and a
	// read that finds one of those objects missing is a change.
	watched bool
}

// Store is an opened ZVF store. Safe for concurrent use.
type Store struct {
	name   string
	st     storage.Store
	cache  Cache
	refs   refCache // cache, when it hands out refs; else nil
	codecs *zarr.Codecs
	conc   int
	log    *slog.Logger
	info   Info
	dtype  zarr.DataType
	dims   int
	levels []*Level
	geom   string // primary geometry type
	shards bool   // 0.7 chunks packed into __shard_ arrays (root shard_layout)
	format format
	root   rootInfo
	// cachePrefix starts every cache key of this store: name and
	// generation, so a reopened store never reads its predecessor's data.
	cachePrefix string
	revision    string
	watched     bool // see Options.watched
	// noTables keeps every answer on the per-chunk path (tests compare
	// the level tables' answers with it).
	noTables bool
	// tablesAnyChunk gives levels of large chunks tables too (tests
	// compare them with the per-chunk path on every level).
	tablesAnyChunk bool
	scratch        freelist.List[*bboxScratch] // reused across queries (see scratchesKept)
	// builds: the level tables' builds, off the request path (Close ends them).
	builds builds
}

// peek looks key up in the cache without loading it.
func (s *Store) peek(key string) (any, bool) {
	if s.cache == nil {
		return nil, false
	}
	return s.cache.Peek(key)
}

// refCache is a Cache that also hands out refs (cache.Cache does): the
// warm path finds a chunk it found before without hashing its key.
type refCache interface {
	PeekRef(key string) (any, *cache.Ref, bool)
	Deref(r *cache.Ref) (any, bool)
	DerefUncounted(r *cache.Ref) (any, bool)
	CountHits(n int)
}

// countHits counts the hits peekVertsTally left to count.
func (s *Store) countHits(n int) {
	if s.refs != nil {
		s.refs.CountHits(n)
	}
}

// Open reads the store's metadata: root, every level, chunk listings and
// shard indexes.
func Open(ctx context.Context, st storage.Store, o Options) (*Store, error) {
	s := &Store{name: o.Name, st: st, cache: o.Cache, codecs: o.Codecs, conc: o.Concurrency, log: o.Logger, watched: o.watched,
		cachePrefix: o.Name + "\x00" + strconv.FormatUint(o.gen, 10) + "\x00"}
	if rc, ok := o.Cache.(refCache); ok {
		s.refs = rc
	}
	if s.codecs == nil {
		s.codecs = zarr.NewCodecs()
	}
	if s.conc <= 0 {
		s.conc = 8
	}
	s.scratch.Init(scratchesKept)
	s.builds.init()
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := s.readRoot(ctx); err != nil {
		return nil, err
	}
	names, err := s.levelNames(ctx)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, s.errf(ErrCorrupt, -1, "", "", "no resolution levels")
	}
	s.levels = make([]*Level, len(names))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for i, n := range names {
		g.Go(func() (err error) {
			defer s.recoverInto(&err, "open level")
			s.levels[i], err = s.openLevel(gctx, n)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	s.dtype = s.levels[0].vdt
	s.info.VertexDType = s.dtype.Name
	for _, l := range s.levels {
		s.info.Sharded = s.info.Sharded || l.lay.sharded()
		s.info.Levels = append(s.info.Levels, l.info)
		if l.vdt != s.dtype {
			s.log.Debug("level vertex dtype differs", "level", l.n, "dtype", l.vdt.Name)
		}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%+v\x00%s", s.info, o.revisionSeed)
	s.revision = hex.EncodeToString(h.Sum(nil)[:8])
	return s, nil
}

// Revision identifies what the store holds: its metadata and, when opened
// through a watching Handle, the storage versions of its metadata objects
// (and a listing of every object after a change to data alone, or always
// with Watch.Walk). HTTP validators (ETags) and
// paging cursors derive from it.
func (s *Store) Revision() string { return s.revision }

// Name is the store's name.
func (s *Store) Name() string { return s.name }

// Info describes the store (do not modify).
func (s *Store) Info() *Info { return &s.info }

// Levels lists the level numbers, finest first.
func (s *Store) Levels() []int {
	out := make([]int, len(s.levels))
	for i, l := range s.levels {
		out[i] = l.n
	}
	return out
}

// Level returns level n.
func (s *Store) Level(n int) (*Level, error) {
	for _, l := range s.levels {
		if l.n == n {
			if e := l.listed.bad.Load(); e != nil {
				return nil, e // its answers would be short (checkListing)
			}
			return l, nil
		}
	}
	return nil, s.errf(ErrNotFound, n, "", "", "no level %d (levels: %v)", n, s.Levels())
}

type rootAttrs struct {
	ZV *struct {
		Version            string          `json:"zv_version"`
		FormatVersion      string          `json:"format_version"`
		Capabilities       []string        `json:"format_capabilities"`
		ChunkShape         []float64       `json:"chunk_shape"`
		Bounds             [][]float64     `json:"bounds"`
		GeometryTypes      []string        `json:"geometry_types"`
		BaseBinShape       []float64       `json:"base_bin_shape"`
		LinksConvention    string          `json:"links_convention"`
		CrossChunkStrategy string          `json:"cross_chunk_strategy"`
		CRS                json.RawMessage `json:"crs"`
	} `json:"zarr_vectors"`
	Multiscales []struct {
		Axes     []Axis `json:"axes"`
		Datasets []struct {
			Path       string `json:"path"`
			Transforms []struct {
				Type        string    `json:"type"`
				Scale       []float64 `json:"scale"`
				Translation []float64 `json:"translation"`
			} `json:"coordinateTransformations"`
		} `json:"datasets"`
	} `json:"multiscales"`
	ShardLayout string `json:"shard_layout"`
	// Tools is what the ingest tools (zarr-vectors-tools) add beside
	// zarr_vectors.
	Tools *struct {
		SkeletonLayout string `json:"skeleton_layout"`
	} `json:"zarr_vectors_tools"`
}

func (s *Store) readGroupAttrs(ctx context.Context, p string) (json.RawMessage, error) {
	b, err := storage.ReadAll(ctx, s.st, join(p, "zarr.json"), zarr.MaxMetadataBytes)
	if err != nil {
		return nil, err
	}
	n, err := zarr.ParseNode(b)
	if err != nil {
		return nil, err
	}
	return n.Attributes, nil
}

// join is not path.Join on purpose: cleaning would fold away a ".." that
// store metadata put in a name, which the storage layer must see to refuse.
func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "/" + b
}

func (s *Store) readRoot(ctx context.Context) error {
	raw, err := s.readGroupAttrs(ctx, "")
	if err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			if s.zarrV2(ctx) {
				return s.errf(ErrUnsupported, -1, "", "", "Zarr v2 store; ZVF needs Zarr v3")
			}
			return s.errf(ErrCorrupt, -1, "", "", "no root zarr.json: not a ZVF store")
		}
		return s.wrap(kindOf(err), -1, "", "", fmt.Errorf("root metadata: %w", err))
	}
	var r rootAttrs
	if err := json.Unmarshal(raw, &r); err != nil {
		return s.errf(ErrCorrupt, -1, "", "", "root attributes: %v", zarr.JSONError(err))
	}
	if r.ZV == nil {
		return s.errf(ErrCorrupt, -1, "", "", "root has no zarr_vectors attributes: not a ZVF store")
	}
	zv := r.ZV
	if zv.Version == "" {
		if zv.FormatVersion != "" {
			return s.errf(ErrUnsupported, -1, "", "", "format_version %q predates zv_version 0.6; this server reads %s", zv.FormatVersion, readVersions)
		}
		return s.errf(ErrUnsupported, -1, "", "", "zv_version missing; this server reads %s", readVersions)
	}
	f, minor, _, err := parseVersion(zv.Version)
	if err != nil {
		return s.errf(ErrUnsupported, -1, "", "", "%v", err)
	}
	if minor == 8 {
		return s.refuse08(ctx, zv.Version, zv.Capabilities)
	}
	s.format = f
	for _, c := range zv.Capabilities {
		switch c {
		case "partitioned_cross_chunk_links":
			return s.errf(ErrUnsupported, -1, "", "", "capability %q (a ZVF 0.8 layout) is not read; %s", c, migrate08)
		case "dense_manifests":
			return s.errf(ErrUnsupported, -1, "", "", "capability %q (ZVF 0.9.4 dense object manifests) is not read; this server reads vlen_manifests_v1 and vlen_manifests_v2 object indexes", c)
		}
	}
	if len(r.Multiscales) == 0 || len(r.Multiscales[0].Axes) == 0 {
		return s.errf(ErrCorrupt, -1, "", "", "root has no multiscales axes")
	}
	d := len(r.Multiscales[0].Axes)
	if d > 16 {
		return s.errf(ErrCorrupt, -1, "", "", "%d axes", d)
	}
	if len(zv.ChunkShape) != d {
		return s.errf(ErrCorrupt, -1, "", "", "chunk_shape %v does not have %d axes", zv.ChunkShape, d)
	}
	for _, c := range zv.ChunkShape {
		if !(c > 0) || math.IsInf(c, 0) {
			return s.errf(ErrCorrupt, -1, "", "", "chunk_shape %v must be positive", zv.ChunkShape)
		}
	}
	s.dims = d
	s.info = Info{
		Name: s.name, ZVVersion: zv.Version, GeometryTypes: nonNil(zv.GeometryTypes), Axes: r.Multiscales[0].Axes,
		Capabilities: nonNil(zv.Capabilities), LinksConvention: zv.LinksConvention, CrossChunkStrategy: zv.CrossChunkStrategy,
		Dims: d, CRS: zv.CRS, Sharded: r.ShardLayout != "", Layout: LayoutChunkArrays,
	}
	if s.format == format09 {
		s.info.Layout = LayoutChunkGrid
	}
	if s.info.LinksConvention == "" {
		s.info.LinksConvention = "implicit_sequential"
	}
	if len(zv.Bounds) == 2 && len(zv.Bounds[0]) == d && len(zv.Bounds[1]) == d {
		s.info.Bounds = [2][]float64{zv.Bounds[0], zv.Bounds[1]}
	}
	if len(zv.GeometryTypes) > 0 {
		s.geom = zv.GeometryTypes[0]
	}
	if s.format == format09 && s.geom == "skeleton" {
		marker := ""
		if r.Tools != nil {
			marker = r.Tools.SkeletonLayout
		}
		if s.info.SkeletonLayout, err = s.skeletonLayout(ctx, marker); err != nil {
			return err
		}
	}
	s.shards = r.ShardLayout != ""
	s.root = rootInfo{chunkShape: zv.ChunkShape, baseBin: zv.BaseBinShape, datasets: map[string][2][]float64{}}
	for _, ds := range r.Multiscales[0].Datasets {
		var scale, tr []float64
		for _, t := range ds.Transforms {
			switch t.Type {
			case "scale":
				scale = t.Scale
			case "translation":
				tr = t.Translation
			}
		}
		s.root.datasets[ds.Path] = [2][]float64{scale, tr}
	}
	return nil
}

// newLayout picks how level l's cells are stored.
func (s *Store) newLayout(l *Level) layout {
	if s.format == format09 {
		return newLayout09(l)
	}
	return newLayout07(l, s.shards)
}

// Skeleton layouts of ZVF 0.9 (zvf-0.9-format §3.4).
const (
	SkeletonLinked = "linked_across_chunks" // every vertex once; chunk-crossing edges as [child, parent] records
	SkeletonSplit  = "split_at_chunk_faces" // face vertices stored in both chunks, joined by records
)

// skeletonLayout reads which of the two 0.9 skeleton layouts a store
// uses: the ingest tools' marker, else the digest's inference (a
// per-fragment segment_id without an SWC header means split). Only the
// linked layout is read.
func (s *Store) skeletonLayout(ctx context.Context, marker string) (string, error) {
	const why = "only linked_across_chunks (every vertex stored once) is read"
	switch marker {
	case SkeletonLinked:
		return marker, nil
	case SkeletonSplit:
		return "", s.errf(ErrUnsupported, -1, "", "", "zarr_vectors_tools.skeleton_layout %q: vertices on chunk faces are stored in both chunks and joined by cross-chunk records; %s", marker, why)
	case "":
	default:
		return "", s.errf(ErrUnsupported, -1, "", "", "zarr_vectors_tools.skeleton_layout %q is not a layout this server knows; %s", marker, why)
	}
	names, err := s.levelNames(ctx)
	if err != nil || len(names) == 0 {
		return SkeletonLinked, nil // Open reports a store without levels
	}
	seg := strconv.Itoa(names[0]) + "/fragment_attributes/segment_id/zarr.json"
	if _, err := s.st.Stat(ctx, seg); err != nil {
		return SkeletonLinked, nil
	}
	for _, k := range []string{"headers/swc/zarr.json", "headers/swc"} {
		if _, err := s.st.Stat(ctx, k); err == nil {
			return SkeletonLinked, nil
		}
	}
	return "", s.errf(ErrUnsupported, -1, "", "", "no zarr_vectors_tools.skeleton_layout, and %s without an SWC header (headers/swc) marks the %s layout; %s", strings.TrimSuffix(seg, "/zarr.json"), SkeletonSplit, why)
}

// zarrV2 reports whether the root holds Zarr v2 metadata instead.
func (s *Store) zarrV2(ctx context.Context) bool {
	for _, k := range []string{".zgroup", ".zarray", ".zattrs"} {
		if _, err := s.st.Stat(ctx, k); err == nil {
			return true
		}
	}
	return false
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// kindOf classifies a lower-level error.
func kindOf(err error) error {
	switch {
	case errors.Is(err, storage.ErrChanged):
		return ErrChanged
	case errors.Is(err, storage.ErrNotFound):
		return ErrNotFound
	case errors.Is(err, storage.ErrUnavailable):
		return ErrUnavailable
	case errors.Is(err, storage.ErrPermission):
		return ErrPermission
	case errors.Is(err, storage.ErrTooLarge), errors.Is(err, storage.ErrNotRegular), errors.Is(err, storage.ErrOutside):
		// A chunk replaced by something huge, a FIFO or a link out of the
		// store: bad data in this store, refused without being read.
		return ErrCorrupt
	case errors.Is(err, zarr.ErrUnsupported):
		return ErrUnsupported
	case errors.Is(err, zarr.ErrCorrupt), errors.Is(err, zarr.ErrMetadata):
		return ErrCorrupt
	}
	return nil
}

// MaxLevel is the largest level number: a folder named by a larger
// integer is no level, as one named by a negative one is not. The API
// takes every number up to it in level= and in paging cursors.
const MaxLevel = math.MaxInt32

// levelNames lists the levels: the root's child groups named by an
// integer. A folder without a zarr.json (a crashed writer's, an S3
// marker) is no level, as the reference reader has it; taken for one, it
// was an empty coarsest level that level=auto answered from. (A Stat per
// level, not storage.FoldersHolding: on an object store that would list
// the whole store.)
func (s *Store) levelNames(ctx context.Context) ([]int, error) {
	l, err := s.st.List(ctx, "")
	if err != nil {
		return nil, s.wrap(nil, -1, "", "", err)
	}
	var out []int
	for _, p := range l.Prefixes {
		name := strings.TrimSuffix(p, "/")
		n, err := strconv.Atoi(name)
		if err != nil || n < 0 || n > MaxLevel || strconv.Itoa(n) != name {
			continue
		}
		if _, err := s.st.Stat(ctx, name+"/zarr.json"); errors.Is(err, storage.ErrNotFound) {
			continue
		}
		out = append(out, n)
	}
	sort.Ints(out)
	return out, nil
}

// ---- per-store metadata needed by levels ----

type rootInfo struct {
	chunkShape []float64
	baseBin    []float64
	datasets   map[string][2][]float64 // path -> scale, translation
}

// numpyDType maps a numpy dtype name as the reference stores it
// ("float32", "f4", "<f4", "uint8", ...) to a Zarr data type.
func numpyDType(name string) (zarr.DataType, error) {
	n := strings.TrimLeft(name, "<=|")
	if strings.HasPrefix(n, ">") {
		return zarr.DataType{}, fmt.Errorf("big-endian dtype %q", name)
	}
	short := map[string]string{
		"f2": "float16", "f4": "float32", "f8": "float64", "i1": "int8", "i2": "int16", "i4": "int32", "i8": "int64",
		"u1": "uint8", "u2": "uint16", "u4": "uint32", "u8": "uint64", "b1": "bool", "?": "bool",
		"float": "float64", "int": "int64", "double": "float64", "half": "float16", "single": "float32",
	}
	if v, ok := short[n]; ok {
		n = v
	}
	dt, err := zarr.ParseDataType(n)
	if err != nil || dt.Variable() || dt.Kind == zarr.KindComplex {
		return zarr.DataType{}, fmt.Errorf("unsupported dtype %q", name)
	}
	return dt, nil
}

// ---- level metadata ----

// levelMeta is zarr_vectors_level.
type levelMeta struct {
	Level              *int            `json:"level"`
	VertexCount        int64           `json:"vertex_count"`
	ObjectSparsity     float64         `json:"object_sparsity"`
	CoarseningMethod   string          `json:"coarsening_method"`
	ChunkShape         []float64       `json:"chunk_shape"`
	ChunkDims          []string        `json:"chunk_dims"`
	ChunkAttrName      string          `json:"chunk_attribute_name"`
	ChunkAttrValues    json.RawMessage `json:"chunk_attribute_values"`
	PreservesObjectIDs bool            `json:"preserves_object_ids"`
	InheritedObjects   *int64          `json:"inherited_num_objects"`
	SharedFragments    bool            `json:"shared_fragments"`
}
