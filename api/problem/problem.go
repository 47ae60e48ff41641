// Package problem is zvfserve's one vocabulary of error kinds: each kind's
// HTTP status, title and RFC 9457 type URI, and the problem+json document
// an error of that kind is answered with. Every route — the API's and the
// Neuroglancer sources' — answers its errors through it, so a client sees
// one type URI per kind wherever it meets it.
package problem

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Kind names a kind of problem; it is the last part of the type URI.
type Kind string

// The kinds. Their statuses and titles are in kinds; openapi.yaml lists
// the same URIs.
const (
	BadParameter        Kind = "bad-parameter"
	NotFound            Kind = "not-found"
	TooLarge            Kind = "too-large"
	StaleCursor         Kind = "stale-cursor"
	StoreChanging       Kind = "store-changing"
	Overloaded          Kind = "overloaded"
	Timeout             Kind = "timeout"
	Cancelled           Kind = "cancelled"
	BackendUnavailable  Kind = "backend-unavailable"
	StorageDenied       Kind = "storage-denied"
	CorruptData         Kind = "corrupt-data"
	Unsupported         Kind = "unsupported"
	Internal            Kind = "internal"
	NotAcceptable       Kind = "not-acceptable"
	MethodNotAllowed    Kind = "method-not-allowed"
	URITooLong          Kind = "uri-too-long"
	Unauthorized        Kind = "unauthorized"
	RangeNotSatisfiable Kind = "range-not-satisfiable"
	// PreconditionFailed: an If-Match names none of the answer's current
	// ETags (RFC 9110 13.1.1).
	PreconditionFailed Kind = "precondition-failed"
	// Unrepresentable: the answer is fine but the chosen file format
	// cannot hold it (a graph with a cycle as SWC).
	Unrepresentable Kind = "unrepresentable"
	// BadFilter: a filter that cannot be read or does not fit the level
	// (its detail names the property, literal or token, and where).
	BadFilter Kind = "bad-filter"
	// StoreChanged: a path of a store version no longer served (a key of
	// a Neuroglancer info read before the store changed); the client
	// must read the info again.
	StoreChanged Kind = "store-changed"
)

// StatusClientClosed is the status logged and counted for a request whose
// client went away (nginx's 499); it is never sent (see Write).
const StatusClientClosed = 499

type kindInfo struct {
	status int
	title  string
}

var kinds = map[Kind]kindInfo{
	BadParameter:       {http.StatusBadRequest, "Bad parameter"},
	NotFound:           {http.StatusNotFound, "Not found"},
	TooLarge:           {http.StatusRequestEntityTooLarge, "Request too large"},
	StaleCursor:        {http.StatusConflict, "Cursor from another store version"},
	StoreChanging:      {http.StatusServiceUnavailable, "Store is being changed"},
	StoreChanged:       {http.StatusGone, "Store changed since this path was given"},
	Overloaded:         {http.StatusServiceUnavailable, "Server busy"},
	Timeout:            {http.StatusGatewayTimeout, "Request timed out"},
	Cancelled:          {StatusClientClosed, "Request cancelled"},
	BackendUnavailable: {http.StatusBadGateway, "Storage unavailable"},
	// The backend refused the server (not the client) an object: a 5xx
	// the operator must act on, not a 403 a client would take for its
	// own credentials, nor a retryable blip (no Retry-After).
	StorageDenied:       {http.StatusBadGateway, "Storage refused access"},
	CorruptData:         {http.StatusUnprocessableEntity, "Corrupt store data"},
	Unsupported:         {http.StatusUnprocessableEntity, "Unsupported store feature"},
	Internal:            {http.StatusInternalServerError, "Internal error"},
	NotAcceptable:       {http.StatusNotAcceptable, "Not acceptable"},
	MethodNotAllowed:    {http.StatusMethodNotAllowed, "Method not allowed"},
	URITooLong:          {http.StatusRequestURITooLong, "URI too long"},
	Unauthorized:        {http.StatusUnauthorized, "Unauthorized"},
	RangeNotSatisfiable: {http.StatusRequestedRangeNotSatisfiable, "Range not satisfiable"},
	PreconditionFailed:  {http.StatusPreconditionFailed, "Precondition failed"},
	Unrepresentable:     {http.StatusUnprocessableEntity, "Not representable in this format"},
	BadFilter:           {http.StatusBadRequest, "Invalid filter"},
}

// TypeBase is the prefix of every problem type URI.
const TypeBase = "https://zvfserve.dev/problems/"

// Status is the HTTP status of kind k (500 for a kind not in the table).
func (k Kind) Status() int {
	if i, ok := kinds[k]; ok {
		return i.status
	}
	return http.StatusInternalServerError
}

// Title is kind k's short, fixed title.
func (k Kind) Title() string {
	if i, ok := kinds[k]; ok {
		return i.title
	}
	return http.StatusText(k.Status())
}

// URI is kind k's problem type URI.
func (k Kind) URI() string { return TypeBase + string(k) }

// Kinds lists every kind (for documentation checks).
func Kinds() []Kind {
	out := make([]Kind, 0, len(kinds))
	for k := range kinds {
		out = append(out, k)
	}
	return out
}

// Details is an RFC 9457 problem document. Detail never carries local
// paths, stack traces or backend messages.
type Details struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Status     int    `json:"status"`
	Detail     string `json:"detail,omitempty"`
	Instance   string `json:"instance,omitempty"`
	RetryAfter int    `json:"-"` // seconds; sent as Retry-After when > 0
}

// New is a problem of kind k.
func New(k Kind, detail string) *Details {
	return &Details{Type: k.URI(), Title: k.Title(), Status: k.Status(), Detail: detail}
}

// Newf is New with a formatted detail.
func Newf(k Kind, format string, a ...any) *Details { return New(k, fmt.Sprintf(format, a...)) }

func (d *Details) Error() string { return d.Title + ": " + d.Detail }

// Kind is the kind d's type URI names ("" for a foreign URI).
func (d *Details) Kind() Kind {
	k, ok := strings.CutPrefix(d.Type, TypeBase)
	if !ok {
		return ""
	}
	return Kind(k)
}

// Write answers r with d as application/problem+json, dropping the
// headers a data answer may have set. A Cancelled problem (the client is
// gone) is sent, if at all, as 408.
func Write(w http.ResponseWriter, r *http.Request, d *Details) {
	h := w.Header()
	// A problem replaces the answer: none of the answer's own headers
	// (a download name, a next page) may stay.
	for _, k := range []string{"ETag", "Cache-Control", "Content-Encoding", "Content-Length", "Last-Modified",
		"Content-Disposition", "Link", "X-Next-Cursor", "X-Vertex-Count", "X-Number-Matched"} {
		h.Del(k)
	}
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if d.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(d.RetryAfter))
	}
	cp := *d
	cp.Instance = clipInstance(r.URL.Path)
	if cp.Status == StatusClientClosed {
		cp.Status = http.StatusRequestTimeout
	}
	w.WriteHeader(cp.Status)
	_ = json.NewEncoder(w).Encode(&cp)
}

// maxInstance bounds the path a problem echoes as its instance: the 414
// for a path too long to serve must not be as large as that path (up to
// the 64 KiB a request's header may hold).
const maxInstance = 1024

// clipInstance is path cut to at most maxInstance bytes at a character
// boundary, marked as cut.
func clipInstance(path string) string {
	if len(path) <= maxInstance {
		return path
	}
	n := maxInstance
	for n > 0 && !utf8.RuneStart(path[n]) {
		n--
	}
	return path[:n] + "…"
}
