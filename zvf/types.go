package zvf

import (
	"github.com/zvfserve/zvfserve/zvf/zarr"

	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Cache is what the reader needs of a cache: load-through Get with
// in-flight deduplication. *cache.Cache satisfies it; nil means no cache.
type Cache interface {
	// Get returns the value for key, loading it with load (value, size in
	// bytes) on a miss; concurrent Gets of one key share one load.
	Get(ctx context.Context, key string, load func(ctx context.Context) (any, int64, error)) (any, error)
	// Peek returns a cached value without loading: the warm path matches
	// cached chunks in place, without building a load closure.
	Peek(key string) (any, bool)
	// RemovePrefix drops every key starting with prefix.
	RemovePrefix(prefix string) int
	// Retire drops every key starting with prefix and keeps none loaded
	// under it later: a store's old version (cache keys start with name
	// and generation) when a new one opens, which requests still running
	// on it would otherwise fill the cache with again.
	Retire(prefix string) int
}

// Key is a chunk key: integer chunk coordinates (one per spatial axis, plus
// a leading attribute bin on attribute-chunked levels).
type Key []int64

func (k Key) String() string { return string(k.appendTo(make([]byte, 0, 8*len(k)))) }

// appendTo appends the dotted form of k to b.
func (k Key) appendTo(b []byte) []byte {
	for i, c := range k {
		if i > 0 {
			b = append(b, '.')
		}
		b = strconv.AppendInt(b, c, 10)
	}
	return b
}

// ParseKey parses a dotted chunk key ("0.1.-2").
func ParseKey(s string) (Key, error) {
	if s == "" || len(s) > 256 {
		return nil, strconv.ErrSyntax
	}
	parts := strings.Split(s, ".")
	k := make(Key, len(parts))
	for i, p := range parts {
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return nil, err
		}
		k[i] = v
	}
	return k, nil
}

func (k Key) equal(o Key) bool { return slices.Equal(k, o) }

func compareKeys(a, b Key) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return len(a) - len(b)
}

// Axis is one spatial axis from the NGFF multiscales block.
type Axis struct {
	Name string `json:"name"`
	Type string `json:"type,omitempty"`
	Unit string `json:"unit,omitempty"`
}

// AttrInfo describes a vertex or object attribute.
type AttrInfo struct {
	Name     string `json:"name"`
	DType    string `json:"dtype"`
	Channels int    `json:"channels"`
	// Categories is non-nil for a dictionary-encoded attribute, and said
	// even when empty (no labels: every value is null).
	Categories []string `json:"categories,omitzero"`
}

// LevelInfo summarises one resolution level.
type LevelInfo struct {
	Level       int       `json:"level"`
	ChunkShape  []float64 `json:"chunk_shape"`
	BinShape    []float64 `json:"bin_shape"`
	BinRatio    []int     `json:"bin_ratio,omitempty"`
	VertexCount int64     `json:"vertex_count"`
	ObjectCount int64     `json:"object_count"`
	// ObjectIndexLayout: vlen_manifests_v1 (row = object id) or
	// vlen_manifests_v2 (ids through object_index/object_ids).
	ObjectIndexLayout  string     `json:"object_index_layout,omitempty"`
	GroupCount         int64      `json:"group_count"`
	ChunkCount         int        `json:"chunk_count"`
	Coarsening         string     `json:"coarsening_method,omitempty"`
	ObjectSparsity     float64    `json:"object_sparsity,omitempty"`
	PreservesObjectIDs bool       `json:"preserves_object_ids,omitempty"`
	SharedFragments    bool       `json:"shared_fragments,omitempty"`
	ChunkDims          []string   `json:"chunk_dims,omitempty"`
	ChunkAttribute     string     `json:"chunk_attribute_name,omitempty"`
	VertexAttributes   []AttrInfo `json:"vertex_attributes"`
	ObjectAttributes   []AttrInfo `json:"object_attributes"`
	LinkDeltas         []int      `json:"link_deltas,omitempty"`
	// LinkAttributes are the per-edge attributes of the level's links
	// (link_attributes/<name>/0); absent when it has none.
	LinkAttributes []AttrInfo `json:"link_attributes,omitempty"`
	// ChunkBounds is the box of the chunk-grid cells the level's chunks
	// occupy ([min corner, max corner]). A chunk's rows lie in its cell (the
	// format says so; Validate reports a chunk whose rows do not), so the
	// level's vertices lie within it, and a client can frame or tile the
	// data without reading any. Absent for a level without chunks.
	ChunkBounds [][]float64 `json:"chunk_bounds,omitempty"`
}

// Info is everything the catalog and descriptor show about a store.
type Info struct {
	Name               string       `json:"name"`
	ZVVersion          string       `json:"zv_version"`
	GeometryTypes      []string     `json:"geometry_types"`
	Axes               []Axis       `json:"axes"`
	Bounds             [2][]float64 `json:"bounds"`
	Capabilities       []string     `json:"capabilities"`
	LinksConvention    string       `json:"links_convention"`
	CrossChunkStrategy string       `json:"cross_chunk_strategy"`
	VertexDType        string       `json:"vertex_dtype"`
	Dims               int          `json:"dims"`
	// Layout is how the store keeps its per-chunk data: per_chunk_arrays
	// (ZVF 0.6, 0.7: an array per chunk) or chunk_grid_arrays (ZVF 0.9:
	// one array of cells per family over the chunk grid).
	Layout string `json:"layout"`
	// Sharded: chunks are packed into shards (0.7's __shard_ arrays, 0.9's
	// sharding_indexed).
	Sharded bool `json:"sharded,omitempty"`
	// SkeletonLayout is how a 0.9 skeleton joins trees across chunks.
	SkeletonLayout string          `json:"skeleton_layout,omitempty"`
	CRS            json.RawMessage `json:"crs,omitempty"`
	Levels         []LevelInfo     `json:"levels"`
}

// Column is one typed column of rows: Rows × Channels values of DType,
// little-endian, packed.
type Column struct {
	Name       string
	DType      string
	Channels   int
	Data       []byte
	Categories []string // set for dictionary-encoded attributes: codes index it
	NullCode   *int64   // the dictionary's _FillValue code (decodes to null)
	typ        zarr.DataType
}

// EdgeColumn is one link attribute's values for an answer's edges. Data
// holds the rows of the edges that have a value only, in edge order: an
// edge without one costs no row, so an answer whose edges mostly have
// none (a ZVF 0.7 store's cross-chunk edges) holds no more than what was
// read. Build one with NewEdgeColumn; read edge i's row with Row.
type EdgeColumn struct {
	Column
	// Valid, when not nil, says which edges have a value (Data holds a
	// row for each true): no stored link row holds one for a cross-chunk
	// edge of a ZVF 0.7 store (its writer keeps none), a skeleton parent
	// the rows' order implies, or a 0.9 links cell whose attribute cell is
	// missing. nil: every edge has one.
	Valid []bool
	// ranks[k] is the number of Data rows before edge k×rankStride, so
	// Row finds an edge's row without counting from the first (nil when
	// Valid is).
	ranks []int
}

// rankStride is the edges between two of EdgeColumn.ranks: a word per
// 64 edges beside Valid's byte an edge.
const rankStride = 64

// NewEdgeColumn is the column of edges whose values col holds, a row for
// each edge valid says has one (valid nil: every edge, in order).
func NewEdgeColumn(col Column, valid []bool) (EdgeColumn, error) {
	c := EdgeColumn{Column: col, Valid: valid}
	rb := col.RowBytes()
	stored := len(valid)
	if valid != nil {
		c.ranks = make([]int, 0, (len(valid)+rankStride-1)/rankStride)
		stored = 0
		for i, ok := range valid {
			if i%rankStride == 0 {
				c.ranks = append(c.ranks, stored)
			}
			if ok {
				stored++
			}
		}
	} else if rb > 0 {
		stored = len(col.Data) / rb
	}
	if rb == 0 || len(col.Data) != stored*rb {
		return EdgeColumn{}, fmt.Errorf("edge attribute %q: %d bytes for %d rows of %d × %s", col.Name, len(col.Data), stored, col.Channels, col.DType)
	}
	return c, nil
}

// Edges is the number of edges the column has a place for.
func (c *EdgeColumn) Edges() int {
	if c.Valid != nil {
		return len(c.Valid)
	}
	if rb := c.RowBytes(); rb > 0 {
		return len(c.Data) / rb
	}
	return 0
}

// Has says whether edge i has a value.
func (c *EdgeColumn) Has(i int) bool {
	return c.Valid == nil || c.Valid[i]
}

// StoredRow is the row of Data holding edge i's value, -1 for an edge
// without one.
func (c *EdgeColumn) StoredRow(i int) int {
	if c.Valid == nil {
		return i
	}
	if !c.Valid[i] {
		return -1
	}
	lo, r := 0, 0 // a column built without NewEdgeColumn counts from its first edge
	if c.ranks != nil {
		lo, r = i-i%rankStride, c.ranks[i/rankStride]
	}
	for _, ok := range c.Valid[lo:i] {
		if ok {
			r++
		}
	}
	return r
}

// Row is edge i's value (Channels elements), nil for an edge without one.
func (c *EdgeColumn) Row(i int) []byte {
	r := c.StoredRow(i)
	if r < 0 {
		return nil
	}
	rb := c.RowBytes()
	return c.Data[r*rb : (r+1)*rb]
}

// At is element i of the edges' values (edge × Channels + channel), as if
// every edge had a row: zero for an edge without a value.
func (c *EdgeColumn) At(i int) Number {
	ch := max(c.Channels, 1)
	r := c.StoredRow(i / ch)
	if r < 0 {
		return c.typ.At(make([]byte, c.typ.Size), 0)
	}
	return c.typ.At(c.Data, r*ch+i%ch)
}

// Number is one element of a column widened without loss (see
// zarr.Number); its Kind is one of KindFloat, KindInt and KindUint (bools
// read as KindUint 0 or 1).
type Number = zarr.Number

// Kinds of Number.
const (
	KindInt   = zarr.KindInt
	KindUint  = zarr.KindUint
	KindFloat = zarr.KindFloat
)

// At is element i of the column (row × Channels + channel).
func (c *Column) At(i int) Number { return c.typ.At(c.Data, i) }

// RowBytes is the size of one row of the column (its Channels elements).
func (c *Column) RowBytes() int { return c.Channels * c.typ.Size }

// ItemBytes is the size of one element of the column.
func (c *Column) ItemBytes() int { return c.typ.Size }

// Batch is the rows one chunk contributes to an answer, in chunk row order.
type Batch struct {
	Chunk     Key
	Rows      int
	Vertices  Column  // Channels = Dims
	ObjectIDs []int64 // nil when the level has no object index
	// WireIDs, for a query that asked for the wire form (BBoxQuery.Wire),
	// holds the object ids as little-endian int64 instead of ObjectIDs.
	WireIDs    []byte
	Attributes []Column
	// First is the index of this batch's first row in the whole answer.
	First int64
	// Source, when set, names the cached chunk rows the batch holds (an
	// encoder may prepare per chunk what it writes of them); nil for
	// rows read from elsewhere.
	Source *ChunkRows
}

// BBoxQuery selects the vertices inside a closed box at one level.
type BBoxQuery struct {
	Min, Max []float64
	// Attributes: nil for none, ["*"] for all vertex attributes.
	Attributes []string
	// Rows are ordered by chunk key, then row within the chunk. A page
	// starts at Resume (the previous page's Next) or, without one, after
	// Offset rows, which are then matched again to be skipped; Limit (>0)
	// stops it after that many rows.
	Resume        *Resume
	Offset, Limit int64
	// Connectivity asks for the edges/faces whose vertices are all in the
	// answer.
	Connectivity bool
	// LinkAttributes, with Connectivity: nil for none, ["*"] for all of
	// the level's link attributes, whose values for each edge come in the
	// result's EdgeAttributes.
	LinkAttributes []string
	linkSel        []*linkAttrMeta
	// EdgeValueBytes (>0), with LinkAttributes, bounds the stored values
	// a page's edges carry: the page stops before the row whose edges
	// would pass it (its first row always fits), counted from the links
	// of each chunk it reads, so a dense graph's page holds as many rows
	// as its edge values allow, not a guess of an edge a row.
	EdgeValueBytes int64
	// Selection narrows the rows (a filter, a sample): the answer is the
	// unselected answer's rows it keeps, in order, with the edges and
	// faces of the unselected answer whose every vertex is kept, indexed
	// into the selected answer. Limit, Resume and Offset count selected
	// rows.
	Selection
	// EdgeBuf, when not nil, is where a line answer's Edges are built
	// (from its start; its capacity reused): a server answering many
	// boxes keeps one rather than allocating and zeroing it per answer.
	// The result's Edges may share its array.
	EdgeBuf []int64
	// Wire asks for the binary format's wire form: a line answer's edges
	// as little-endian uint32 pairs in the result's WireEdges (built in
	// WireBuf, as EdgeBuf) when every index of the answer fits uint32,
	// and each batch's object ids in WireIDs. An encoder that writes them
	// as they are skips a conversion a request, and the edges take half
	// the memory.
	Wire    bool
	WireBuf []byte
	// VertexDst, with Wire, is where a point answer's matching may put
	// the vertex bytes of a chunk it cuts (see VertexDst); nil: in the
	// reader's own buffers.
	VertexDst VertexDst
	// Waiting, when set, is told on the answer's goroutine each time the
	// answer is about to wait for a chunk still being read from storage
	// (never for a cached one).
	Waiting StorageWait
}

// StorageWait is told when an answer is about to wait for storage: an
// encoder may pass on what it holds there, so a cold answer's rows
// travel while the rest of the box is read rather than when its buffer
// fills. (An interface, like VertexDst: a method value would cost the
// request an allocation.)
type StorageWait interface {
	WaitingForStorage()
}

// VertexDst lends a binary point answer's matching the memory its bytes
// are written from (an encoder's free body buffer), so the rows of a chunk
// the box cuts are copied once, from the cached chunk to the body, rather
// than into a buffer of the reader and from there to the body.
type VertexDst interface {
	// VertexSpace returns room for at least n bytes (length 0), valid
	// until the next batch is emitted, or nil when there is none at hand.
	// A batch whose Vertices.Data starts the space handed out last holds
	// its bytes there already; an encoder that finds them there writes
	// them in place.
	VertexSpace(n int) []byte
}

// BBoxResult closes a streamed answer.
type BBoxResult struct {
	Count int64 // rows emitted
	// More reports that rows remain after this page; Next is where the
	// next page starts.
	More bool
	Next *Resume
	// Edges (pairs) and Faces (Width indices each) index into the rows of
	// the whole answer, all pages in order (0 = its first row). A page
	// carries the connections whose last vertex (largest index) it
	// emitted, so every connection of the answer is in exactly one page,
	// and every vertex it names has been emitted by then.
	Edges []int64
	// WireEdges replaces Edges (then nil) when the query asked for the
	// wire form and the answer's indices fit it: little-endian uint32,
	// two an edge, never nil.
	WireEdges []byte
	Faces     []int64
	FaceWidth int
	// EdgeAttributes: the link attributes the query asked for, one row per
	// edge of Edges (WireEdges), in their order.
	EdgeAttributes []EdgeColumn
	Chunks         int // chunks read
	// Matched is the number of rows of the whole answer (all pages), when
	// MatchedKnown: on the last page, and on the first page when at most
	// 16 of the box's chunks follow it (counting them is one more window
	// of matching).
	Matched      int64
	MatchedKnown bool
}

// Object is one object at one level.
type Object struct {
	ID         int64
	Level      int
	Vertices   Column
	Count      int64
	Attributes []Column
	// Edges index into Vertices rows: polyline order, graph edges, skeleton
	// (child, parent) edges. Faces: FaceWidth indices per face.
	Edges []int64
	// WireEdges replaces Edges (then nil) for a line's answer from
	// WireObject: the edges as the binary format's little-endian uint32
	// pairs.
	WireEdges []byte
	Faces     []int64
	FaceWidth int
	// EdgeAttributes: the link attributes ObjectWith asked for, a row per
	// edge of Edges.
	EdgeAttributes []EdgeColumn
	// FragmentCounts: rows per manifest fragment, in manifest order.
	FragmentCounts []int64
	// ObjectAttributes: per-object attribute values (one row each).
	ObjectAttributes []Column
}

// ManifestBlock is one decoded block with its fragments resolved to rows.
type ManifestBlock struct {
	Chunk     Key            `json:"chunk"`
	Mode      int            `json:"mode"`
	Fragments []FragmentRows `json:"fragments"`
}

// FragmentRows is one fragment and the chunk rows it names.
type FragmentRows struct {
	Fragment int64   `json:"fragment"`
	Range    []int64 `json:"range,omitempty"` // [start, count] for range fragments
	Rows     []int64 `json:"rows,omitempty"`  // explicit fragments
	Count    int64   `json:"count"`
}

// Manifest is an object's manifest at one level.
type Manifest struct {
	ID     int64           `json:"object_id"`
	Level  int             `json:"level"`
	Blocks []ManifestBlock `json:"blocks"`
}

// Tile is one chunk as a viewer streams it.
type Tile struct {
	Key        Key
	Vertices   Column
	Rows       int
	Fragments  [][2]int64 // per fragment [start, count] (explicit ones: [-1, count])
	Attributes []Column
	Links      []int64 // links/0 rows, LinkWidth values each
	LinkWidth  int
}
