package zarr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// NodeType is "group" or "array".
type NodeType string

const (
	NodeGroup NodeType = "group"
	NodeArray NodeType = "array"
)

// Node is a parsed zarr.json.
type Node struct {
	Type NodeType
	// Attributes are passed through untouched ("{}" when absent).
	Attributes json.RawMessage
	// Array is set for array nodes.
	Array *ArrayMeta
}

// CodecSpec is one entry of a codecs list.
type CodecSpec struct {
	Name          string          `json:"name"`
	Configuration json.RawMessage `json:"configuration,omitempty"`
}

// ArrayMeta is the metadata of one array.
type ArrayMeta struct {
	Shape          []int64
	DataType       DataType
	ChunkShape     []int64
	KeyEncoding    KeyEncoding
	FillValue      json.RawMessage
	Fill           []byte // FillValue decoded: one element (LE) or the vlen element bytes
	Codecs         []CodecSpec
	DimensionNames []*string
	Attributes     json.RawMessage
}

// KeyEncoding is a chunk key encoding.
type KeyEncoding struct {
	Name      string // "default" or "v2"
	Separator string // "/" or "."
}

// ChunkKey returns the storage key (relative to the array) of the chunk at
// coords.
func (k KeyEncoding) ChunkKey(coords []int64) string {
	var b strings.Builder
	if k.Name == "default" {
		b.WriteString("c")
		for _, c := range coords {
			b.WriteString(k.Separator)
			b.WriteString(strconv.FormatInt(c, 10))
		}
		return b.String()
	}
	if len(coords) == 0 {
		return "0"
	}
	for i, c := range coords {
		if i > 0 {
			b.WriteString(k.Separator)
		}
		b.WriteString(strconv.FormatInt(c, 10))
	}
	return b.String()
}

type rawNode struct {
	ZarrFormat          *int              `json:"zarr_format"`
	NodeType            string            `json:"node_type"`
	Attributes          json.RawMessage   `json:"attributes"`
	Shape               []int64           `json:"shape"`
	DataType            json.RawMessage   `json:"data_type"`
	ChunkGrid           *namedConfig      `json:"chunk_grid"`
	ChunkKeyEncoding    *namedConfig      `json:"chunk_key_encoding"`
	FillValue           json.RawMessage   `json:"fill_value"`
	Codecs              []json.RawMessage `json:"codecs"`
	DimensionNames      []*string         `json:"dimension_names"`
	StorageTransformers []json.RawMessage `json:"storage_transformers"`
}

type namedConfig struct {
	Name           string          `json:"name"`
	Configuration  json.RawMessage `json:"configuration"`
	MustUnderstand *bool           `json:"must_understand"`
}

// knownArrayKeys are the members of array metadata this package interprets;
// any other member that is an object with must_understand != false is an
// extension we would silently misread, so it is rejected.
var knownKeys = map[string]bool{
	"zarr_format": true, "node_type": true, "attributes": true, "shape": true,
	"data_type": true, "chunk_grid": true, "chunk_key_encoding": true,
	"fill_value": true, "codecs": true, "dimension_names": true,
	"storage_transformers": true, "consolidated_metadata": true,
}

// maxRank bounds array rank; nothing real comes close, and it keeps
// products of shapes from overflowing.
const maxRank = 32

// ParseNode parses a zarr.json document.
func ParseNode(b []byte) (*Node, error) {
	var r rawNode
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, metaErr("zarr.json: %v", JSONError(err))
	}
	if r.ZarrFormat == nil || *r.ZarrFormat != 3 {
		return nil, metaErr("zarr_format must be 3")
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return nil, metaErr("zarr.json: %v", JSONError(err))
	}
	for k, v := range members {
		if knownKeys[k] {
			continue
		}
		var ext struct {
			MustUnderstand *bool `json:"must_understand"`
		}
		if json.Unmarshal(v, &ext) == nil && (ext.MustUnderstand == nil || *ext.MustUnderstand) {
			if bytes.HasPrefix(bytes.TrimSpace(v), []byte("{")) {
				return nil, unsupported("metadata extension %q must be understood", k)
			}
		}
	}
	attrs := r.Attributes
	if len(bytes.TrimSpace(attrs)) == 0 || string(bytes.TrimSpace(attrs)) == "null" {
		attrs = json.RawMessage("{}")
	}
	n := &Node{Type: NodeType(r.NodeType), Attributes: attrs}
	switch n.Type {
	case NodeGroup:
		return n, nil
	case NodeArray:
	default:
		return nil, metaErr("node_type %q", r.NodeType)
	}
	m, err := parseArray(&r)
	if err != nil {
		return nil, err
	}
	m.Attributes = attrs
	n.Array = m
	return n, nil
}

func parseArray(r *rawNode) (*ArrayMeta, error) {
	m := &ArrayMeta{Shape: r.Shape, DimensionNames: r.DimensionNames}
	if r.Shape == nil {
		return nil, metaErr("array has no shape")
	}
	if len(r.Shape) > maxRank {
		return nil, metaErr("rank %d exceeds %d", len(r.Shape), maxRank)
	}
	for _, s := range r.Shape {
		if s < 0 {
			return nil, metaErr("negative shape %v", r.Shape)
		}
	}
	if len(r.DataType) == 0 {
		return nil, metaErr("array has no data_type")
	}
	dt, err := parseDataTypeJSON(r.DataType)
	if err != nil {
		return nil, err
	}
	m.DataType = dt
	if r.ChunkGrid == nil || r.ChunkGrid.Name != "regular" {
		name := ""
		if r.ChunkGrid != nil {
			name = r.ChunkGrid.Name
		}
		return nil, unsupported("chunk grid %q", name)
	}
	var grid struct {
		ChunkShape []int64 `json:"chunk_shape"`
	}
	if err := json.Unmarshal(r.ChunkGrid.Configuration, &grid); err != nil {
		return nil, metaErr("chunk_grid configuration: %v", JSONError(err))
	}
	if len(grid.ChunkShape) != len(r.Shape) {
		return nil, metaErr("chunk_shape %v does not match rank %d", grid.ChunkShape, len(r.Shape))
	}
	if err := checkChunkShape(grid.ChunkShape); err != nil {
		return nil, err
	}
	m.ChunkShape = grid.ChunkShape
	m.KeyEncoding, err = parseKeyEncoding(r.ChunkKeyEncoding)
	if err != nil {
		return nil, err
	}
	if len(r.StorageTransformers) > 0 {
		return nil, unsupported("storage transformers")
	}
	m.FillValue = r.FillValue
	if m.Fill, err = FillBytes(dt, r.FillValue); err != nil {
		return nil, err
	}
	if len(r.Codecs) == 0 {
		return nil, metaErr("array has no codecs")
	}
	if m.Codecs, err = parseCodecSpecs(r.Codecs); err != nil {
		return nil, err
	}
	return m, nil
}

// checkChunkShape: every edge is positive and the element count fits
// (products of shapes below it cannot overflow).
func checkChunkShape(cs []int64) error {
	elems := int64(1)
	for _, c := range cs {
		if c <= 0 {
			return metaErr("chunk_shape %v must be positive", cs)
		}
		if elems > (1<<62)/c {
			return metaErr("chunk_shape %v too large", cs)
		}
		elems *= c
	}
	return nil
}

func parseCodecSpec(raw json.RawMessage) (CodecSpec, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return CodecSpec{Name: s}, nil
	}
	var nc namedConfig
	if err := json.Unmarshal(raw, &nc); err != nil || nc.Name == "" {
		return CodecSpec{}, metaErr("codec entry %s", raw)
	}
	return CodecSpec{Name: nc.Name, Configuration: nc.Configuration}, nil
}

// parseCodecSpecs parses a codec list (the array's, or a sharding or vlen
// codec's inner chains).
func parseCodecSpecs(list []json.RawMessage) ([]CodecSpec, error) {
	out := make([]CodecSpec, 0, len(list))
	for _, r := range list {
		sp, err := parseCodecSpec(r)
		if err != nil {
			return nil, err
		}
		out = append(out, sp)
	}
	return out, nil
}

func parseKeyEncoding(nc *namedConfig) (KeyEncoding, error) {
	if nc == nil {
		return KeyEncoding{}, metaErr("array has no chunk_key_encoding")
	}
	var cfg struct {
		Separator string `json:"separator"`
	}
	if len(nc.Configuration) > 0 {
		if err := json.Unmarshal(nc.Configuration, &cfg); err != nil {
			return KeyEncoding{}, metaErr("chunk_key_encoding configuration: %v", JSONError(err))
		}
	}
	switch nc.Name {
	case "default":
		if cfg.Separator == "" {
			cfg.Separator = "/"
		}
	case "v2":
		if cfg.Separator == "" {
			cfg.Separator = "."
		}
	default:
		return KeyEncoding{}, unsupported("chunk key encoding %q", nc.Name)
	}
	if cfg.Separator != "/" && cfg.Separator != "." {
		return KeyEncoding{}, metaErr("chunk key separator %q", cfg.Separator)
	}
	return KeyEncoding{Name: nc.Name, Separator: cfg.Separator}, nil
}

// ChunkElems is the number of elements in one (full) chunk.
func (m *ArrayMeta) ChunkElems() int64 {
	n := int64(1)
	for _, c := range m.ChunkShape {
		n *= c
	}
	return n
}

// GridShape is the number of chunks along each axis.
func (m *ArrayMeta) GridShape() []int64 {
	g := make([]int64, len(m.Shape))
	for i := range g {
		if m.Shape[i] > 0 { // ceil without the overflow of s+c-1
			g[i] = (m.Shape[i]-1)/m.ChunkShape[i] + 1
		}
	}
	return g
}

func (m *ArrayMeta) String() string {
	return fmt.Sprintf("%s%v chunks %v", m.DataType.Name, m.Shape, m.ChunkShape)
}
