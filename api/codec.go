package api

import (
	"bufio"

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
	// prefers; the others (binary floats barely shrink, and a browser
	// wraps them as TypedArrays without copying) never are.
	compressible() bool
	newEncoder() encoder
}

// encoder streams one answer: begin, then batch for every batch in order,
// then end.
type encoder interface {
	begin(w *bufio.Writer, m *payloadMeta) error
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

type binaryCodec struct{}

func (binaryCodec) format() string      { return "bin" }
func (binaryCodec) contentType() string { return "application/vnd.zvf.v1+octet-stream" }
func (binaryCodec) compressible() bool  { return false }
func (binaryCodec) newEncoder() encoder { return &binaryEncoder{} }

// payloadCodecs are the vertex payload formats, the server's preference
// first (the answer to a request that does not say); the text formats
// take their buffers from text.
func payloadCodecs(text *batchers) []codec {
	return []codec{jsonCodec{text}, ndjsonCodec{text}, binaryCodec{}}
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
	// Export is set for the domain file formats (codec_export.go).
	Export *exportMeta `json:"-"`
}

// trailer closes it: counts, paging and connectivity, plus kind-specific
// fields (Extra) such as an object's id or a chunk's fragments.
type trailer struct {
	Count     int64
	Next      string
	Edges     []int64
	Faces     []int64
	FaceWidth int
	Extra     map[string]any
}
