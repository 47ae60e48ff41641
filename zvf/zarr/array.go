package zarr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// Array is an opened array: metadata parsed and the codec chain resolved
// once, so reading chunks does no metadata work.
type Array struct {
	st   storage.Store
	path string
	meta *ArrayMeta
	pipe *pipeline
	lim  Limits
}

// OpenArray reads and parses <path>/zarr.json. cs may be nil (a private
// codec environment is then made; share one across arrays instead).
func OpenArray(ctx context.Context, st storage.Store, p string, cs *Codecs) (*Array, error) {
	return openArray(ctx, st, p, cs, parseArrayDoc)
}

// openArray reads <p>/zarr.json and parses it with parse.
func openArray(ctx context.Context, st storage.Store, p string, cs *Codecs, parse func([]byte) (*ArrayMeta, error)) (*Array, error) {
	p = strings.Trim(p, "/")
	b, err := storage.ReadAll(ctx, st, join(p, "zarr.json"), MaxMetadataBytes)
	return openFetched(st, p, cs, parse, b, err)
}

// openFetched is openArray with <p>/zarr.json read already (b, or err
// from reading it).
func openFetched(st storage.Store, p string, cs *Codecs, parse func([]byte) (*ArrayMeta, error), b []byte, err error) (*Array, error) {
	if err != nil {
		return nil, &Error{Path: p, Err: err}
	}
	m, err := parse(b)
	if err != nil {
		return nil, &Error{Path: p, Err: err}
	}
	return NewArray(st, p, m, cs)
}

// parseArrayDoc is ParseNode for a document that must be an array's.
func parseArrayDoc(b []byte) (*ArrayMeta, error) {
	n, err := ParseNode(b)
	if err != nil {
		return nil, err
	}
	if n.Type != NodeArray {
		return nil, metaErr("node is a %s, not an array", n.Type)
	}
	return n.Array, nil
}

// NewArray binds already-parsed metadata to a store (for callers that cache
// metadata or build it in memory).
func NewArray(st storage.Store, p string, m *ArrayMeta, cs *Codecs) (*Array, error) {
	if cs == nil {
		cs = NewCodecs()
	}
	pipe, err := cs.build("chunk", m.Codecs, rep{shape: m.ChunkShape, typ: m.DataType, fill: m.Fill})
	if err != nil {
		return nil, &Error{Path: p, Err: err}
	}
	return &Array{st: st, path: strings.Trim(p, "/"), meta: m, pipe: pipe, lim: cs.lim}, nil
}

// Meta returns the array's metadata (do not modify).
func (a *Array) Meta() *ArrayMeta { return a.meta }

// Path is the array's key prefix in its store.
func (a *Array) Path() string { return a.path }

// join is not path.Join on purpose: cleaning would fold away a ".." that
// metadata put in a key, which the storage layer must see to refuse.
func join(p, k string) string {
	if p == "" {
		return k
	}
	return p + "/" + k
}

// ChunkKey is the storage key of the chunk at coords.
func (a *Array) ChunkKey(coords []int64) string {
	return join(a.path, a.meta.KeyEncoding.ChunkKey(coords))
}

func (a *Array) checkCoords(coords []int64) error {
	if len(coords) != len(a.meta.Shape) {
		return fmt.Errorf("chunk coords %v for rank %d", coords, len(a.meta.Shape))
	}
	g := a.meta.GridShape()
	for i, c := range coords {
		if c < 0 || c >= g[i] {
			return fmt.Errorf("chunk coords %v outside grid %v", coords, g)
		}
	}
	return nil
}

// ReadChunk decodes the chunk at coords. Edge chunks come back at the full
// chunk shape, as stored. A missing chunk is the fill value.
func (a *Array) ReadChunk(ctx context.Context, coords []int64) (*Chunk, error) {
	if err := a.checkCoords(coords); err != nil {
		return nil, &Error{Path: a.path, Err: err}
	}
	key := a.ChunkKey(coords)
	b, err := storage.ReadAll(ctx, a.st, key, a.chunkBound())
	return a.decodeStored(key, b, err)
}

// decodeStored decodes the stored bytes of the chunk at key, or turns the
// error of reading them into the chunk's answer (a missing chunk is the
// fill value).
func (a *Array) decodeStored(key string, b []byte, err error) (*Chunk, error) {
	if errors.Is(err, storage.ErrNotFound) {
		return a.fillChunk(), nil
	}
	if err != nil {
		return nil, &Error{Path: a.path, Chunk: key, Err: err}
	}
	c, err := a.pipe.decode(b)
	if err != nil {
		var ze *Error
		if errors.As(err, &ze) {
			ze.Path, ze.Chunk = a.path, key
			return nil, ze
		}
		return nil, &Error{Path: a.path, Chunk: key, Err: err}
	}
	return c, nil
}

func (a *Array) fillChunk() *Chunk {
	m := a.meta
	n := m.ChunkElems()
	c := &Chunk{Shape: m.ChunkShape, Type: m.DataType}
	if m.DataType.Variable() {
		c.Elems = make([][]byte, n)
		for i := range c.Elems {
			c.Elems[i] = m.Fill
		}
		return c
	}
	c.Data = make([]byte, n*int64(m.DataType.Size))
	if !allZero(m.Fill) {
		for i := int64(0); i < n; i++ {
			copy(c.Data[i*int64(len(m.Fill)):], m.Fill)
		}
	}
	return c
}

func allZero(b []byte) bool {
	for _, v := range b {
		if v != 0 {
			return false
		}
	}
	return true
}

// Read decodes the whole array, cropping edge chunks. It is for arrays of
// moderate size (side arrays, tests, zarr-cat): one larger than
// MaxReadBytes fails with ErrTooLarge before anything is allocated.
func (a *Array) Read(ctx context.Context) (*Chunk, error) {
	m := a.meta
	total, _, ok := sizeBytes(m.Shape, m.DataType, a.lim.MaxReadBytes)
	if !ok {
		return nil, &Error{Path: a.path, Err: fmt.Errorf("%w: array %v of %s exceeds the %d-byte read limit", ErrTooLarge, m.Shape, m.DataType.Name, a.lim.MaxReadBytes)}
	}
	out := &Chunk{Shape: m.Shape, Type: m.DataType}
	size := int64(m.DataType.Size)
	if m.DataType.Variable() {
		out.Elems = make([][]byte, total)
	} else {
		out.Data = make([]byte, total*size)
	}
	if total == 0 {
		return out, nil
	}
	rank := len(m.Shape)
	grid := m.GridShape()
	coords := make([]int64, rank)
	for {
		c, err := a.ReadChunk(ctx, coords)
		if err != nil {
			return nil, err
		}
		copyChunkInto(out, c, coords, m)
		if !Advance(coords, grid) {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// copyChunkInto places chunk c (full chunk shape) at grid position coords
// of out, dropping the parts past the array's edge.
func copyChunkInto(out, c *Chunk, coords []int64, m *ArrayMeta) {
	rank := len(m.Shape)
	if rank == 0 {
		if out.Elems != nil {
			out.Elems[0] = c.Elems[0]
		} else {
			copy(out.Data, c.Data)
		}
		return
	}
	size := int64(m.DataType.Size)
	cs := m.ChunkShape
	// extent of this chunk inside the array
	ext := make([]int64, rank)
	origin := make([]int64, rank)
	for i := range ext {
		origin[i] = coords[i] * cs[i]
		ext[i] = min(cs[i], m.Shape[i]-origin[i])
	}
	// iterate over rows (all axes but the last)
	idx := make([]int64, rank)
	rowLen := ext[rank-1]
	for {
		var src, dst int64
		for i := 0; i < rank; i++ {
			src = src*cs[i] + idx[i]
			dst = dst*m.Shape[i] + origin[i] + idx[i]
		}
		if out.Elems != nil {
			copy(out.Elems[dst:dst+rowLen], c.Elems[src:src+rowLen])
		} else {
			copy(out.Data[dst*size:(dst+rowLen)*size], c.Data[src*size:(src+rowLen)*size])
		}
		if !Advance(idx[:rank-1], ext[:rank-1]) {
			return
		}
	}
}

// Advance steps idx to the next position of a grid of shape lim in C
// order (the last axis fastest); false once it has passed the last one
// (idx is then all zeros). It walks chunk grids and the rows of a chunk.
func Advance(idx, lim []int64) bool {
	for i := len(idx) - 1; i >= 0; i-- {
		idx[i]++
		if idx[i] < lim[i] {
			return true
		}
		idx[i] = 0
	}
	return false
}

// ReadBytes returns the whole content of a 1-D uint8 array — the layout of
// every ZVF blob. A single-chunk array with a plain bytes codec costs one
// Get and no copy; a missing chunk is fill bytes; shape [0] is empty.
func (a *Array) ReadBytes(ctx context.Context) ([]byte, error) {
	m := a.meta
	if !a.isBytes() {
		// The store says a byte blob is something else: bad metadata
		// (a 422 for the store), not a fault of this server.
		return nil, &Error{Path: a.path, Err: metaErr("a byte blob must be a 1-D uint8 or int8 array, not %s", m)}
	}
	if m.Shape[0] == 0 {
		return []byte{}, nil
	}
	if m.Shape[0] <= m.ChunkShape[0] {
		c, err := a.ReadChunk(ctx, []int64{0})
		if err != nil {
			return nil, err
		}
		return c.Data[:m.Shape[0]], nil
	}
	c, err := a.Read(ctx)
	if err != nil {
		return nil, err
	}
	return c.Data, nil
}

// isBytes: a is a 1-D array of bytes, what ReadBytes reads.
func (a *Array) isBytes() bool {
	m := a.meta
	return len(m.Shape) == 1 && m.DataType.Size == 1 && m.DataType.Kind != KindBool
}

// ReadBytesFetched is ReadBytes for a caller that read the stored bytes of
// the array's chunk at key (or failed to) while it read the metadata: on
// an object store the two reads then cost one round trip, not two. The
// bytes are used only if the array is one chunk stored at key and they
// are within the bound its metadata allows; otherwise it reads as
// ReadBytes does.
func (a *Array) ReadBytesFetched(ctx context.Context, key string, b []byte, err error) ([]byte, error) {
	m := a.meta
	if !a.isBytes() || m.Shape[0] == 0 || m.Shape[0] > m.ChunkShape[0] || a.ChunkKey([]int64{0}) != key {
		return a.ReadBytes(ctx)
	}
	if bound := a.chunkBound(); err == nil && int64(len(b)) > bound {
		err = fmt.Errorf("%w: %d bytes stored, at most %d accepted", storage.ErrTooLarge, len(b), bound)
	}
	c, err := a.decodeStored(key, b, err)
	if err != nil {
		return nil, err
	}
	return c.Data[:m.Shape[0]], nil
}

// ---- writing ----

// CreateArray writes <p>/zarr.json for m and returns the array.
func CreateArray(ctx context.Context, w storage.Writer, p string, m *ArrayMeta, cs *Codecs) (*Array, error) {
	a, err := NewArray(w, p, m, cs)
	if err != nil {
		return nil, err
	}
	b, err := MarshalArrayMeta(m)
	if err != nil {
		return nil, &Error{Path: p, Err: err}
	}
	if err := w.Put(ctx, join(a.path, "zarr.json"), b); err != nil {
		return nil, &Error{Path: p, Err: err}
	}
	return a, nil
}

// WriteChunk encodes c (full chunk shape) and stores it at coords.
func (a *Array) WriteChunk(ctx context.Context, w storage.Writer, coords []int64, c *Chunk) error {
	if err := a.checkCoords(coords); err != nil {
		return &Error{Path: a.path, Err: err}
	}
	if c.Len() != a.meta.ChunkElems() {
		return &Error{Path: a.path, Err: fmt.Errorf("chunk has %d elements, want %d", c.Len(), a.meta.ChunkElems())}
	}
	b, err := a.pipe.encode(c)
	if err != nil {
		return &Error{Path: a.path, Chunk: a.ChunkKey(coords), Err: err}
	}
	return w.Put(ctx, a.ChunkKey(coords), b)
}

// MarshalArrayMeta renders m as zarr.json.
func MarshalArrayMeta(m *ArrayMeta) ([]byte, error) {
	fill := m.FillValue
	if len(fill) == 0 {
		fill = json.RawMessage("0")
	}
	attrs := m.Attributes
	if len(attrs) == 0 {
		attrs = json.RawMessage("{}")
	}
	doc := map[string]any{
		"zarr_format": 3,
		"node_type":   "array",
		"shape":       m.Shape,
		"data_type":   m.DataType.Name,
		"chunk_grid": map[string]any{"name": "regular",
			"configuration": map[string]any{"chunk_shape": m.ChunkShape}},
		"chunk_key_encoding": map[string]any{"name": m.KeyEncoding.Name,
			"configuration": map[string]any{"separator": m.KeyEncoding.Separator}},
		"fill_value":           fill,
		"codecs":               m.Codecs,
		"attributes":           attrs,
		"storage_transformers": []any{},
	}
	if m.DimensionNames != nil {
		doc["dimension_names"] = m.DimensionNames
	}
	return json.MarshalIndent(doc, "", "  ")
}
