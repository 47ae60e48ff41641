package api

import (
	"bufio"
	"maps"

	"github.com/zvfserve/zvfserve/zvf"
)

// Vertex payloads (bbox, object and chunk answers) come in one format per
// codec: JSON, NDJSON and the binary layout of docs/binary-format.md. A
// codec names its format (f=) and media type (Accept); negotiate picks one
// per request, and its encoder streams the answer. Adding a format is
// adding a codec.

// codec is one output format.
type codec interface {
	format() string      // its f= name
	contentType() string // its media type
	// compressible formats are sent with the content coding the client
	// prefers; the others never are.
	compressible() bool
	newEncoder() encoder
	// pageRows is the most rows one page of a paged answer with this
	// header may hold (0: no bound beyond the request's limit): an
	// encoder that must hold part of each row until the end bounds the
	// page by what that part takes in bytes, not only in rows.
	pageRows(m *payloadMeta) int64
}

// encoder streams one answer: begin, then batch for every batch in order,
// then end. What it holds beyond its writer is counted in mem (which may
// be nil).
type encoder interface {
	begin(w *bufio.Writer, m *payloadMeta, mem *answerMem) error
	batch(b *zvf.Batch) error
	end(t *trailer) error
}

type jsonCodec struct{ text *batchers }

func (jsonCodec) format() string      { return "json" }
func (jsonCodec) contentType() string { return "application/json" }
func (jsonCodec) compressible() bool  { return true }
func (c jsonCodec) newEncoder() encoder {
	return &jsonEncoder{text: c.text, par: c.text.get()}
}

type ndjsonCodec struct{ text *batchers }

func (ndjsonCodec) format() string      { return "ndjson" }
func (ndjsonCodec) contentType() string { return "application/x-ndjson" }
func (ndjsonCodec) compressible() bool  { return true }
func (c ndjsonCodec) newEncoder() encoder {
	return &ndjsonEncoder{text: c.text, par: c.text.get()}
}

// binaryCodec is the binary layout; with a precision (precision=, > 0)
// its vertices are quantized (kind 6 blocks).
type binaryCodec struct{ precision float64 }

func (binaryCodec) format() string      { return "bin" }
func (binaryCodec) contentType() string { return "application/vnd.zvf.v1+octet-stream" }

// Binary is compressed too: the browser undoes the coding before the page
// sees the bytes, so its blocks are still wrapped without copying, and
// quantized vertices, planar, shrink by a third or more (docs/performance.md).
func (binaryCodec) compressible() bool    { return true }
func (c binaryCodec) newEncoder() encoder { return &binaryEncoder{precision: c.precision} }

func (ndjsonCodec) pageRows(*payloadMeta) int64 { return 0 } // every row goes out whole as it comes
func (binaryCodec) pageRows(*payloadMeta) int64 { return 0 } // likewise, a block a batch

// jsonPageHold is the most bytes of object ids and attribute values (as
// stored: a 128-channel float32 attribute is 512 bytes a row) a JSON
// page holds by default (Options.JSONPageBytes): they are members after
// the vertex list, so they are kept until the vertices are out. With
// object ids alone a page can hold a million rows, the default
// --max-vertices; wide attributes make pages smaller.
const jsonPageHold = 8 << 20

func (c jsonCodec) pageRows(m *payloadMeta) int64 {
	held := 0
	if m.ObjectIDs {
		held += 8
	}
	for _, a := range m.Attributes {
		held += dtypeOf(a.DType).size * max(a.Channels, 1)
	}
	if held == 0 {
		return 0
	}
	limit := c.text.pageHold
	if limit <= 0 {
		limit = jsonPageHold
	}
	return max(1, limit/int64(held))
}

// dtype is what the text formats need to know of a column's data type:
// its size in bytes and the most JSON text one value takes (a minus sign
// and every digit, exponent included).
type dtype struct{ size, text int }

var dtypes = map[string]dtype{
	"bool": {1, 5}, "int8": {1, 4}, "uint8": {1, 3}, "int16": {2, 6}, "uint16": {2, 5},
	"int32": {4, 11}, "uint32": {4, 10}, "int64": {8, 20}, "uint64": {8, 20},
	"float16": {2, 15}, "float32": {4, 15}, "float64": {8, 24},
}

// dtypeOf is name's entry, or the widest for a name not listed.
func dtypeOf(name string) dtype {
	if d, ok := dtypes[name]; ok {
		return d
	}
	return dtype{8, 24}
}

// textWidth is the most text one row of an attribute takes in JSON, with
// the comma before it (a bound: rounds of rows are sized by it).
func textWidth(a zvf.AttrInfo) int {
	w := dtypeOf(a.DType).text
	if a.Categories != nil { // categorical: a label, or null
		w = len("null")
		for _, c := range a.Categories {
			w = max(w, 6*len(c)+2) // every byte escaped, in quotes
		}
	}
	if a.Channels > 1 {
		return 1 + 2 + a.Channels*(w+1)
	}
	return 1 + w
}

// vertexWidth is textWidth for a payload's vertex rows.
func vertexWidth(m *payloadMeta) int {
	return textWidth(zvf.AttrInfo{DType: m.VertexDType, Channels: max(m.Dims, 2)})
}

// payloadCodecs are the vertex payload formats, the server's preference
// first (the answer to a request that does not say); the text formats
// take their buffers from text.
func payloadCodecs(text *batchers) []codec {
	return []codec{jsonCodec{text}, ndjsonCodec{text}, binaryCodec{}, arrowCodec{}}
}

// jsonOnly is the codec list of the routes that answer JSON documents.
func jsonOnly(text *batchers) []codec { return []codec{jsonCodec{text}} }

// payloadMeta opens a vertex payload (bbox, object or chunk answer).
type payloadMeta struct {
	Kind        string         `json:"kind"`
	Store       string         `json:"store"`
	Level       int            `json:"level"`
	Dims        int            `json:"dims"`
	VertexDType string         `json:"vertex_dtype"`
	Attributes  []zvf.AttrInfo `json:"attribute_info"`
	ObjectIDs   bool           `json:"has_object_ids"`
	// EdgeAttributes are the link attributes a bbox, object or chunk
	// answer gives its edges (edge_attributes=), absent when it gives none.
	EdgeAttributes []zvf.AttrInfo `json:"edge_attribute_info,omitempty"`
	// Export is set for the domain file formats (codec_export.go).
	Export *exportMeta `json:"-"`
	// Arrow is set for the Arrow formats (codec_arrow.go).
	Arrow *arrowMeta `json:"-"`
}

// trailer closes it: counts, paging and connectivity, plus kind-specific
// fields (Extra) such as an object's id or a chunk's fragments.
type trailer struct {
	Count int64
	Next  string
	Edges []int64
	// WireEdges, from a bbox answer whose query asked for the wire form
	// (only the binary encoder's), replaces Edges: little-endian uint32
	// pairs, written as they are.
	WireEdges []byte
	Faces     []int64
	FaceWidth int
	// EdgeAttributes: the link attributes asked for, a row per edge (nil
	// when none were asked for: the answer is as it was).
	EdgeAttributes []zvf.EdgeColumn
	Extra          map[string]any
	// Page: the trailer is a bbox page's, whose extra members "offset"
	// and, when MatchedKnown, "number_matched" are Offset and Matched,
	// held as numbers (in Extra they cost every page a map). extra gives
	// them with Extra's as one map.
	Page         bool
	Offset       int64
	Matched      int64
	MatchedKnown bool
}

// extra returns the trailer's extra members: Extra's, and a page's
// numbers (in a new map, Extra untouched).
func (t *trailer) extra() map[string]any {
	if !t.Page {
		return t.Extra
	}
	m := make(map[string]any, len(t.Extra)+2)
	maps.Copy(m, t.Extra)
	m["offset"] = t.Offset
	if t.MatchedKnown {
		m["number_matched"] = t.Matched
	}
	return m
}
