package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/zvfserve/zvfserve/api/suggest"
	"github.com/zvfserve/zvfserve/zvf"
)

// store returns the request's store as currently served, or the typed
// error that keeps it from being served (a problem like any other). Under
// wrap it is the version wrap pinned for this attempt (every call of one
// attempt gets the same one, and a retry the next); elsewhere it is looked
// up now.
func (s *Server) store(r *http.Request) (*zvf.Store, error) {
	if a, ok := r.Context().Value(attemptKey).(*attempt); ok && a.pinned {
		return a.st, a.err
	}
	_, st, err := s.lookup(chi.URLParam(r, "store"))
	return st, err
}

// maxSuggestedStores is the most stores a 404 for an unknown one looks
// through for the name meant.
const maxSuggestedStores = 1000

// lookup finds a store by name: its handle and the version it serves now.
func (s *Server) lookup(name string) (*zvf.Handle, *zvf.Store, error) {
	if !ValidStoreName(name) {
		return nil, nil, badRequest("invalid store name")
	}
	h, ok := s.stores[name]
	if !ok {
		msg := fmt.Sprintf("no store %q", name)
		// Suggested among a bounded number only: each name costs a
		// distance, and 404s are cheap to ask for.
		if len(s.names) <= maxSuggestedStores {
			if near := suggest.Nearest(name, s.names); near != "" {
				msg += " (did you mean " + near + "?)"
			}
		}
		return nil, nil, notFound(msg + "; GET /api/v1/stores lists the stores")
	}
	st, err := h.Current()
	return h, st, err
}

// level is the level a request names: the query's level= (default 0), or
// the path's {level} on the chunk routes. Anything but a level number is a
// 400; a number the store lacks is a 404.
func (s *Server) level(st *zvf.Store, r *http.Request) (*zvf.Level, error) {
	v := query(r).Get("level")
	if p := chi.URLParam(r, "level"); p != "" {
		v = p
	} else if v == "" {
		v = "0"
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > zvf.MaxLevel || strconv.Itoa(n) != v {
		return nil, badRequest(fmt.Sprintf("level %q is not a level number (0, 1, 2, …)", v))
	}
	return st.Level(n)
}

// subject is what a request is about: the store version it answers from
// and, when its route names them, the level (query or path) and the
// object or group id.
type subject struct {
	st *zvf.Store
	l  *zvf.Level
	id int64
}

// subject resolves the request's store, then its level and id as asked.
func (s *Server) subject(r *http.Request, level, id bool) (subject, error) {
	var sub subject
	var err error
	if sub.st, err = s.store(r); err != nil {
		return sub, err
	}
	if id {
		if sub.id, err = parseID(r); err != nil {
			return sub, err
		}
	}
	if level {
		if sub.l, err = s.level(sub.st, r); err != nil {
			return sub, err
		}
	}
	return sub, nil
}

// payloadRequest reads what every vertex-payload route takes beside its
// subject — the attributes, the representation — and answers 304 when the
// client's copy is current (done).
func (s *Server) payloadRequest(w http.ResponseWriter, r *http.Request, st *zvf.Store, kind string) (attrs []string, rep representation, done bool, err error) {
	if attrs, err = parseAttrs(query(r)); err != nil {
		return nil, rep, false, err
	}
	if kind == "object" {
		rep, err = s.negotiateAnswer(r, st, kind)
	} else {
		rep, err = negotiate(r, payloadCodecs(&s.text))
	}
	if err == nil {
		rep, err = withPrecision(r, rep)
	}
	if err != nil {
		return nil, rep, false, err
	}
	return attrs, rep, s.notModified(w, r, s.etag(st, r, rep)), nil
}

// columnInfos describes attribute columns for a payload's header.
func columnInfos(cols []zvf.Column) []zvf.AttrInfo {
	out := make([]zvf.AttrInfo, 0, len(cols))
	for _, c := range cols {
		out = append(out, zvf.AttrInfo{Name: c.Name, DType: c.DType, Channels: c.Channels, Categories: c.Categories})
	}
	return out
}

// parseID reads the {id} route parameter: a non-negative integer in
// canonical decimal (no sign, no leading zero), so that an object has one
// URL for caches and one name for its export's file.
func parseID(r *http.Request) (int64, error) {
	v := chi.URLParam(r, "id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id < 0 || strconv.FormatInt(id, 10) != v {
		return 0, badRequest(fmt.Sprintf("id %q is not a non-negative integer in decimal without sign or leading zeros", v))
	}
	return id, nil
}

func parseAttrs(q queryArgs) ([]string, error) {
	return parseNames(q, "attributes")
}

// parseNames reads the attribute names of the parameter param: a
// comma-separated list, or * for all; nil when it is not given.
func parseNames(q queryArgs, param string) ([]string, error) {
	v := q.Get(param)
	if v == "" {
		return nil, nil
	}
	if v == "*" {
		return []string{"*"}, nil
	}
	names := strings.Split(v, ",")
	if len(names) > 256 {
		return nil, badRequest("too many attributes")
	}
	for i, n := range names {
		if n == "" || len(n) > 256 {
			return nil, badRequest("empty or overlong attribute name")
		}
		// Named twice, an attribute would be two members of one name in
		// a JSON answer's attributes (two columns in Arrow and CSV).
		if slices.Contains(names[:i], n) {
			return nil, badRequest(fmt.Sprintf("attribute %q is named twice in %s; name it once", n, param))
		}
	}
	return names, nil
}

// parseBox reads the closed box min=…&max=… of a store with dims axes.
func parseBox(q queryArgs, dims int, p *answerParts) (min, max []float64, err error) {
	// Both corners in one array, each a full slice of it.
	both := p.boxCorners(dims)
	min, max = both[:dims:dims], both[dims:]
	if err = parseCorner(min, q.Get("min"), "min"); err != nil {
		return nil, nil, err
	}
	if err = parseCorner(max, q.Get("max"), "max"); err != nil {
		return nil, nil, err
	}
	for i := range min {
		if min[i] > max[i] {
			return nil, nil, badRequest(fmt.Sprintf("min[%d] = %v is greater than max[%d] = %v: min is the box's lower corner, max its upper", i, min[i], i, max[i]))
		}
	}
	return min, max, nil
}

// cornerBound bounds a box corner's coordinates (docs/security.md).
const cornerBound = 1e300

// parseCorner reads the corner v (one number per axis) into out.
func parseCorner(out []float64, v string, name string) error {
	dims := len(out)
	if v == "" {
		return badRequest(fmt.Sprintf("%s is required: %d comma-separated numbers", name, dims))
	}
	if n := strings.Count(v, ",") + 1; n != dims {
		return badRequest(fmt.Sprintf("%s needs %d numbers (one per axis), got %d", name, dims, n))
	}
	i := 0
	for p := range strings.SplitSeq(v, ",") {
		t := strings.TrimSpace(p)
		if !decimal(t) {
			return badRequest(fmt.Sprintf("%s[%d] = %q is not a decimal number: digits with an optional sign, fraction and exponent (12, -0.5, 1.5e3), finite and within ±1e300", name, i, p))
		}
		f, err := strconv.ParseFloat(t, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > cornerBound {
			return badRequest(fmt.Sprintf("%s[%d] = %q is not a finite number within ±1e300", name, i, p))
		}
		out[i] = f
		i++
	}
	return nil
}

// IsDecimal reports whether s is a number as a box corner takes it (see
// decimal): for a client, the CLI's --bbox, that checks before it asks.
func IsDecimal(s string) bool { return decimal(s) }

// decimal reports whether s is a number as corners are documented:
// [+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?. It leaves
// out what strconv.ParseFloat also takes — Go's hexadecimal floats and
// digit separators (0x1p4, 1_0), Inf and NaN — which no client of the
// API means by a coordinate.
func decimal(s string) bool {
	i := 0
	digits := func() int {
		n := 0
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i, n = i+1, n+1
		}
		return n
	}
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	n := digits()
	if i < len(s) && s[i] == '.' {
		i++
		n += digits()
	}
	if n == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

// ---- catalog and descriptor ----

type catalogEntry struct {
	Name          string       `json:"name"`
	Status        string       `json:"status"` // "ok" or "error"
	Problem       *Problem     `json:"problem,omitempty"`
	ZVVersion     string       `json:"zv_version"`
	GeometryTypes []string     `json:"geometry_types"`
	Bounds        [2][]float64 `json:"bounds"`
	Dims          int          `json:"dims"`
	Levels        []int        `json:"levels"`
	VertexCount   int64        `json:"vertex_count"`
	URL           string       `json:"url"`
}

func (s *Server) listStores(w http.ResponseWriter, r *http.Request) error {
	out := struct {
		Stores []catalogEntry `json:"stores"`
	}{Stores: []catalogEntry{}}
	for _, n := range s.names {
		st, err := s.stores[n].Current()
		if err != nil {
			// Listed, so an operator sees why it is not served.
			out.Stores = append(out.Stores, catalogEntry{Name: n, Status: "error", Problem: classify(err),
				GeometryTypes: []string{}, Levels: []int{}, URL: s.o.PublicURL + "/api/v1/stores/" + n})
			continue
		}
		info := st.Info()
		e := catalogEntry{Name: n, Status: "ok", ZVVersion: info.ZVVersion, GeometryTypes: info.GeometryTypes, Bounds: info.Bounds,
			Dims: info.Dims, Levels: st.Levels(), URL: s.o.PublicURL + "/api/v1/stores/" + n}
		if len(info.Levels) > 0 {
			e.VertexCount = info.Levels[0].VertexCount
		}
		out.Stores = append(out.Stores, e)
	}
	return s.writeJSON(w, r, nil, out)
}

// edgeValueBytes bounds the edge values (edge_attributes=) a page
// carries: every format holds the page's edges and their values until
// its end (JSON's members after the vertices, NDJSON's last line, the
// binary blocks and Arrow's edges table after the rows), so wide link
// attributes, or a dense graph's many edges a row, would hold far more
// than a page's other bounds allow. zvf counts each row's edges from
// the links it reads (zvf.BBoxQuery.EdgeValueBytes); 0: no edge values.
func (s *Server) edgeValueBytes(m *payloadMeta) int64 {
	if len(m.EdgeAttributes) == 0 {
		return 0
	}
	if s.text.pageHold > 0 {
		return s.text.pageHold
	}
	return jsonPageHold
}

func (s *Server) describeStore(w http.ResponseWriter, r *http.Request) error {
	st, err := s.store(r)
	if err != nil {
		return err
	}
	// The Neuroglancer sources are absolute URLs (Neuroglancer takes no
	// others), built on the address the client used: the answer varies
	// with it, and with the proxy headers when they are trusted.
	base := s.baseURL(r)
	if s.o.TrustProxyHeaders && s.o.PublicURL == "" {
		for _, k := range forwardedHeaders {
			addVary(w.Header(), k)
		}
	}
	w.Header().Set("Cache-Control", descriptorCacheControl)
	d, err := s.descriptor(r.Context(), st, base)
	switch {
	case err == nil:
		return s.writeJSONOf(w, r, st, base, d)
	case errors.Is(err, zvf.ErrUnavailable), errors.Is(err, zvf.ErrPermission), errors.Is(err, zvf.ErrCorrupt):
		// The store's description stands; only the ready state's sample
		// of objects could not be read (a backend that fails or hangs,
		// an object index that is corrupt). It is sent without them, and
		// not to be kept: no ETag (no 304 would vouch for it as the
		// version's), no-store. A change or the request's deadline is
		// the answer's error as anywhere else.
		s.log.Warn("store descriptor without its Neuroglancer objects", "store", st.Name(), "err", err)
		w.Header().Set("Cache-Control", "no-store")
		return s.writeJSONOf(w, r, nil, base, d)
	default:
		return err
	}
}

// ---- bbox ----

// parseLimit reads a bbox's limit (v, "" for none): a positive whole
// number, clamped to MaxVertices as a limit above the server's maximum is
// (OGC API – Features): the answer is paged with next like any other.
func (s *Server) parseLimit(v string) (int64, error) {
	if v == "" {
		return s.o.MaxVertices, nil
	}
	l, err := strconv.ParseInt(v, 10, 64)
	if errors.Is(err, strconv.ErrRange) && l > 0 {
		// A whole number past int64 (ParseInt gives MaxInt64): larger
		// than any maximum, so clamped as well.
		err = nil
	}
	if err != nil || l < 1 {
		return 0, badRequest(fmt.Sprintf("limit %q must be a positive integer", v))
	}
	return min(l, s.o.MaxVertices), nil
}

func (s *Server) bbox(w http.ResponseWriter, r *http.Request) error {
	start := s.o.Now()
	st, err := s.store(r)
	if err != nil {
		return err
	}
	q := query(r)
	dims := st.Info().Dims
	min, max, err := parseBox(q, dims, partsOf(r.Context()))
	if err != nil {
		return err
	}
	attrs, err := parseAttrs(q)
	if err != nil {
		return err
	}
	sel, err := parseSelection(q)
	if err != nil {
		return err
	}
	limit, err := s.parseLimit(q.Get("limit"))
	if err != nil {
		return err
	}
	cur, hash, stale, err := bboxCursor(r, st, q)
	if err != nil {
		return err
	}
	rep, err := s.negotiateAnswer(r, st, "bbox")
	if err == nil {
		rep, err = withPrecision(r, rep)
	}
	if err != nil {
		return err
	}
	l, err := s.bboxLevel(r, q, st, cur, stale, zvf.BBoxQuery{Min: min, Max: max, Limit: limit, Attributes: attrs, Selection: sel})
	if err != nil {
		return err
	}
	am, attrs, err := arrowSetup(r, rep, st, l, attrs, limit)
	if err != nil {
		return err
	}
	edgeAttrs, err := edgeAttrsSetup(q, rep, am, geometryOf(st))
	if err != nil {
		return err
	}
	if q.Get("connectivity") == "false" {
		sh := shape{kind: "bbox", geom: geometryOf(st), dims: dims}
		if why := needsConnectivity(rep, sh, am); why != "" {
			return badRequest("connectivity=false: " + why + "; give no connectivity=false, or ask f=json, ndjson, bin or arrow")
		}
	}
	// level=auto answers from estimates that become exact as chunks are
	// read, so one URL may be answered from another level later: the
	// level chosen is part of what the (strong) ETag names.
	variant := ""
	if q.Get("level") == "auto" {
		variant = "level=" + strconv.Itoa(l.N())
	}
	etag := s.etagOf(st, r, rep, variant)
	if stale != nil {
		if p := unmatched(r, etag); p != nil {
			return p
		}
		return stale
	}
	// An If-Match naming none of etag is answered once the query is
	// known to be valid (its attribute names among them), before any
	// chunk is read: a 404 for an attribute the level lacks comes first
	// (RFC 9110 13.2.1).
	if s.notModified(w, r, etag) {
		return nil
	}
	attrs, export, err := s.exportSetup(r.Context(), w, r, rep, st, l, "bbox", attrs, limit)
	if err != nil {
		return err
	}
	zq := zvf.BBoxQuery{Min: min, Max: max, Attributes: attrs, Resume: cur.Resume, Limit: limit, Connectivity: q.Get("connectivity") != "false", Selection: sel,
		LinkAttributes: edgeAttrs}
	if cur.Resume == nil {
		zq.Offset = cur.Offset // a format 1 cursor
	}
	meta := partsOf(r.Context()).newMeta()
	*meta = payloadMeta{Kind: "bbox", Store: st.Name(), Level: l.N(), Dims: dims, VertexDType: l.VertexDType(), ObjectIDs: l.Info().ObjectCount > 0, Export: export, Arrow: am}
	if meta.Attributes, err = attrInfos(l, attrs); err != nil {
		return err
	}
	if meta.EdgeAttributes, err = linkAttrInfos(l, zq.LinkAttributes); err != nil {
		return err
	}
	if err := edgeColumnsFit(am, meta.EdgeAttributes); err != nil {
		return err
	}
	if done, err := refuseFound(w, func() error { return nil }); done || err != nil {
		return err
	}
	if err := refuseUnpagedBox(r.Context(), rep, l, zq, export); err != nil {
		return err
	}
	if am != nil && am.table == tableVertices && am.geo == nil {
		zq.Connectivity = false // the vertex table has no place for it
	}
	var edges *edgeBufs // the pooled lists the answer's edges are built in
	if zq.Connectivity {
		edges = s.pools.edges.get()
		zq.EdgeBuf, zq.WireBuf = edges.i64, edges.wire
		defer s.pools.edges.put(edges) // after streamPayload: the encoder has written them
	}
	// The binary encoder writes edges and ids in their wire form as they
	// come.
	_, zq.Wire = rep.codec.(binaryCodec)
	// Headers the answer's end decides go out as headers when the answer
	// was held back whole, else as the trailers declared when it started.
	return s.streamPayload(w, r, rep, start, meta, bboxTrailers[:], func(enc encoder, body *bodyWriter) (*trailer, error) {
		// A page is bounded by what its encoder must hold, in bytes, too,
		// and by the edge values every format holds to its end.
		if n := rep.codec.pageRows(meta); n > 0 && n < zq.Limit {
			zq.Limit = n
		}
		zq.EdgeValueBytes = s.edgeValueBytes(meta)
		if be, ok := enc.(*binaryEncoder); ok {
			zq.VertexDst = be // cut chunks' rows matched into the body buffer
		}
		zq.Waiting = body
		res, err := l.BBox(r.Context(), zq, body.emit)
		if err != nil {
			return nil, err
		}
		if edges != nil && cap(res.Edges) > cap(edges.i64) {
			edges.i64 = res.Edges // grown: the larger array goes back to the pool
		}
		if edges != nil && cap(res.WireEdges) > cap(edges.wire) {
			edges.wire = res.WireEdges
		}
		return s.pageEnd(w, r, st, l, cur, hash, res), nil
	})
}

// bboxCursor reads a bbox request's cursor, with the query's hash it
// was made for ("" without a cursor: an answer of one page needs none;
// pageEnd works it out when it writes one). stale is the 409 of a cursor
// of a version no longer served, unless If-Match names the walk's tag of
// the version the cursor came from: the change that makes the cursor
// stale is the one that precondition tests, so it is its 412 (the caller
// judges it once the tag is known).
func bboxCursor(r *http.Request, st *zvf.Store, q queryArgs) (cur cursor, hash string, stale, err error) {
	if q.Get("cursor") != "" {
		hash = queryHash(st.Name(), q)
	}
	cur, err = decodeCursor(q.Get("cursor"), hash, st.Revision())
	if errors.Is(err, errCursorVersion) {
		if err := otherVersion(r, st, "a cursor"); err != nil {
			return cur, hash, nil, err
		}
		return cur, hash, staleCursor(), nil
	}
	return cur, hash, nil, err
}

// bboxLevel is the level a bbox request (r, its query q) answers from: the one it names,
// its cursor's for level=auto on a later page, else the one
// ChooseLevelWith finds for the box, limit, attributes and selection of
// zq (edge values need a level that keeps them; edgeAttrsSetup checks
// the names' use once the level is known).
func (s *Server) bboxLevel(r *http.Request, q queryArgs, st *zvf.Store, cur cursor, stale error, zq zvf.BBoxQuery) (*zvf.Level, error) {
	if q.Get("level") != "auto" {
		return s.level(st, r)
	}
	if q.Get("cursor") != "" {
		l, err := st.Level(cur.Level)
		if err != nil && stale != nil {
			return nil, stale // the cursor's level is gone with its version
		}
		return l, err
	}
	linkAttrs, err := parseNames(q, "edge_attributes")
	if err != nil {
		return nil, err
	}
	n, err := st.ChooseLevelWith(r.Context(), zq.Min, zq.Max, zq.Limit, zq.Attributes, linkAttrs, zq.Selection)
	if err != nil {
		return nil, err
	}
	return st.Level(n)
}

// pageEnd is a bbox page's trailer, and the headers its end decides: the
// next page's cursor (Link, X-Next-Cursor), the whole answer's count when
// it is known (OGC numberMatched) and this page's.
func (s *Server) pageEnd(w http.ResponseWriter, r *http.Request, st *zvf.Store, l *zvf.Level, cur cursor, hash string, res zvf.BBoxResult) *trailer {
	t := partsOf(r.Context()).newTrailer()
	*t = trailer{Count: res.Count, Edges: res.Edges, WireEdges: res.WireEdges, Faces: res.Faces, FaceWidth: res.FaceWidth,
		EdgeAttributes: res.EdgeAttributes, Page: true, Offset: cur.Offset}
	h := w.Header()
	if res.More {
		if hash == "" {
			hash = queryHash(st.Name(), query(r))
		}
		t.Next = cursor{Offset: cur.Offset + res.Count, Level: l.N(), Hash: hash, Version: st.Revision(), Resume: res.Next}.encode()
		h.Set("Link", "<"+s.o.PublicURL+r.URL.Path+"?"+withCursor(r.URL.RawQuery, t.Next)+`>; rel="next"`)
		h.Set("X-Next-Cursor", t.Next)
	}
	count := strconv.FormatInt(res.Count, 10)
	if res.MatchedKnown {
		// The last page knows, and the first when counting the rest is
		// cheap (zvf.BBoxResult.MatchedKnown). A whole answer's two
		// counts are one number: formatted once.
		t.Matched, t.MatchedKnown = res.Matched, true
		matched := count
		if res.Matched != res.Count {
			matched = strconv.FormatInt(res.Matched, 10)
		}
		setHeader(w, "X-Number-Matched", matched)
	}
	setHeader(w, "X-Vertex-Count", count)
	return t
}

// withCursor is the query raw with its cursor (if any) replaced by next,
// the rest as the client wrote it: re-encoded, a query grows (a comma
// becomes %2C) past what the server accepts.
func withCursor(raw, next string) string {
	var mem [512]byte
	b := appendWalkQuery(mem[:0], raw)
	return string(b) + "cursor=" + next // base64url: nothing to escape
}

// appendWalkQuery appends the query raw without its cursor, each
// parameter followed by '&': what every page of a paged walk shares
// (withCursor's links, and so the walk's ETag, see etagOf). What RFC 3986
// allows in a query stays as sent; anything else (a client may send '>',
// '"' or a byte over 0x7f as it is) is escaped, so the URL is one within
// the Link's <…>, and the first page's raw query gives the bytes its
// links give. The cursor is found by its decoded key, as the handlers
// read it (url.ParseQuery): "c%75rsor=…" is the cursor too.
func appendWalkQuery(b []byte, raw string) []byte {
	return appendQuery(b, raw, false)
}

// appendTagQuery is appendWalkQuery with each key decoded (then escaped
// as appendWalkQuery escapes): what the ETag hashes, so that one query
// spelled with escaped keys ("l%69mit=10") has the tag of the one
// spelled plainly, as it has the same answer.
func appendTagQuery(b []byte, raw string) []byte {
	return appendQuery(b, raw, true)
}

func appendQuery(b []byte, raw string, decodeKeys bool) []byte {
	for p := range strings.SplitSeq(raw, "&") {
		if p == "" {
			continue
		}
		key, value, hasValue := strings.Cut(p, "=")
		if strings.ContainsAny(key, "%+") {
			if k, err := url.QueryUnescape(key); err == nil {
				if k == "cursor" {
					continue
				}
				if decodeKeys {
					b = appendEscaped(b, k, true)
					if hasValue {
						b = appendEscaped(append(b, '='), value, false)
					}
					b = append(b, '&')
					continue
				}
			}
		} else if key == "cursor" {
			continue
		}
		b = append(appendEscaped(b, p, false), '&')
	}
	return b
}

// appendEscaped appends p, escaping what RFC 3986 does not allow in a
// query; a decoded key (key) also has '%', '+', '&' and '=' escaped, so
// that it reads back as the same one key.
func appendEscaped(b []byte, p string, key bool) []byte {
	// Runs of bytes that stay as sent are appended whole: a box's query
	// is all of them, and byte-at-a-time appends were a tenth of the
	// ETag's cost.
	for len(p) > 0 {
		i := 0
		for i < len(p) && queryBytes[p[i]] && !(key && strings.IndexByte("%+&=", p[i]) >= 0) {
			i++
		}
		b = append(b, p[:i]...)
		if i == len(p) {
			break
		}
		const hex = "0123456789ABCDEF"
		c := p[i]
		b = append(b, '%', hex[c>>4], hex[c&15])
		p = p[i+1:]
	}
	return b
}

// queryBytes[c] says c may stand as it is in a URI's query (RFC 3986:
// unreserved, sub-delims, ':', '@', '/', '?', and '%' of an escape); a
// read-only table, so the ETag's walk of a query is a load a byte.
var queryBytes = func() (t [256]bool) {
	for c := range 256 {
		b := byte(c)
		t[c] = 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' ||
			strings.IndexByte("-._~!$&'()*+,;=:@/?%", b) >= 0
	}
	return t
}()

// bboxTrailers are the headers a bbox answer's end decides (read only:
// one array for every answer, not a slice allocated per request).
var bboxTrailers = [...]string{"Link", "X-Next-Cursor", "X-Vertex-Count", "X-Number-Matched"}

// streamPayload writes a payload answer (bbox, object, chunk) in rep's
// format: the body, the encoder begun with meta, the batches fill emits,
// the trailer it returns. trailers are the headers the answer's end
// decides (sent as HTTP trailers when the answer streams).
func (s *Server) streamPayload(w http.ResponseWriter, r *http.Request, rep representation, start time.Time, meta *payloadMeta, trailers []string,
	fill func(enc encoder, body *bodyWriter) (*trailer, error)) error {
	p := partsOf(r.Context())
	enc := p.newEncoder(rep.codec)
	body, err := s.newBody(w, p, rep, start)
	if err != nil {
		return err
	}
	defer body.release()
	body.lazy.trailers, body.enc = trailers, enc
	if err := enc.begin(body.Writer, meta, &body.mem); err != nil {
		return err
	}
	t, err := fill(enc, body)
	if err != nil {
		return err
	}
	if err := enc.end(t); err != nil {
		return err
	}
	return body.finish()
}

// edgeAttrsSetup reads a request's edge_attributes (the link attributes
// whose values its edges carry) and refuses them where the answer has no
// place for them, rather than leaving them out unsaid. geom is the
// store's geometry: PLY has an edge element for lines only.
func edgeAttrsSetup(q queryArgs, rep representation, am *arrowMeta, geom string) ([]string, error) {
	names, err := parseNames(q, "edge_attributes")
	if err != nil || names == nil {
		return nil, err
	}
	if q.Get("connectivity") == "false" {
		return nil, badRequest("edge_attributes are values of the answer's edges: give no connectivity=false")
	}
	switch rep.codec.(type) {
	case jsonCodec, ndjsonCodec, binaryCodec:
		return names, nil
	case arrowCodec:
		if am != nil && am.table == tableEdges {
			return names, nil
		}
		return nil, badRequest("edge_attributes: f=arrow carries them in table=edges (a column each)")
	case geoarrowCodec:
		return nil, badRequest("edge_attributes: f=geoarrow has a row per object, not per edge; " + edgeFormats)
	}
	if rep.codec.format() == plyCodec.name && plyEdges(geom) {
		return names, nil
	}
	if rep.codec.format() == plyCodec.name {
		return nil, badRequest(fmt.Sprintf("edge_attributes: f=ply of a %s store has no edges; %s", geom, edgeFormats))
	}
	return nil, badRequest(fmt.Sprintf("edge_attributes: f=%s has no place for edge values; %s", rep.codec.format(), edgeFormats))
}

// edgeFormats names the formats that carry edge values, for a refusal.
const edgeFormats = "f=json, f=ndjson, f=bin, f=arrow&table=edges and f=ply (streamlines, skeletons, graphs) carry them"

// edgeColumnsFit refuses an Arrow edges table whose link attribute
// column would share its name with an index column (v0, v1): readers
// take columns by name, so two of one name are confused or refused.
func edgeColumnsFit(am *arrowMeta, infos []zvf.AttrInfo) error {
	if am == nil || am.table != tableEdges {
		return nil
	}
	for _, a := range infos {
		if a.Name == "v0" || a.Name == "v1" {
			return unrepresentable(fmt.Sprintf("f=arrow&table=edges would have two columns named %q (the link attribute and the edge's index column); ask for other edge attributes, or f=json or f=bin", a.Name))
		}
	}
	return nil
}

// linkAttrInfos describes the link attributes names asks for, in order
// (nil for none).
func linkAttrInfos(l *zvf.Level, names []string) ([]zvf.AttrInfo, error) {
	all := l.Info().LinkAttributes
	if len(names) == 1 && names[0] == "*" {
		return all, nil
	}
	var out []zvf.AttrInfo
	for _, n := range names {
		i := slices.IndexFunc(all, func(a zvf.AttrInfo) bool { return a.Name == n })
		if err := l.UnservedLinkAttribute(n); i < 0 && err != nil {
			return nil, err
		}
		if i < 0 {
			return nil, notFound(fmt.Sprintf("no link attribute %q at level %d", n, l.N()))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// attrInfos describes the attribute columns a query returns, in order.
func attrInfos(l *zvf.Level, names []string) ([]zvf.AttrInfo, error) {
	all := l.Info().VertexAttributes
	if len(names) == 1 && names[0] == "*" {
		return all, nil
	}
	out := make([]zvf.AttrInfo, 0, len(names))
	for _, n := range names {
		found := false
		for _, a := range all {
			if a.Name == n {
				out = append(out, a)
				found = true
			}
		}
		if !found {
			names := make([]string, len(all))
			for i, a := range all {
				names[i] = a.Name
			}
			msg := fmt.Sprintf("no vertex attribute %q at level %d", n, l.N())
			if near := suggest.Nearest(n, names); near != "" {
				msg += " (did you mean " + near + "?)"
			}
			if len(names) == 0 {
				return nil, notFound(fmt.Sprintf("%s; level %d has none", msg, l.N()))
			}
			return nil, notFound(fmt.Sprintf("%s; level %d has %s", msg, l.N(), strings.Join(names, ", ")))
		}
	}
	return out, nil
}

// ---- objects, groups ----

func (s *Server) object(w http.ResponseWriter, r *http.Request) error {
	start := s.o.Now()
	sub, err := s.subject(r, true, true)
	if err != nil {
		return err
	}
	st, l, id := sub.st, sub.l, sub.id
	attrs, rep, done, err := s.payloadRequest(w, r, st, "object")
	if done || err != nil {
		return err
	}
	attrs, export, err := s.exportSetup(r.Context(), w, r, rep, st, l, "object", attrs, s.o.MaxVertices)
	if err != nil {
		return err
	}
	am, attrs, err := arrowSetup(r, rep, st, l, attrs, s.o.MaxVertices)
	if err != nil {
		return err
	}
	if am != nil && am.geo != nil {
		am.geo.objectID = id
	}
	edgeAttrs, err := edgeAttrsSetup(query(r), rep, am, geometryOf(st))
	if err != nil {
		return err
	}
	_, wire := rep.codec.(binaryCodec) // a line's edges as the encoder writes them
	oq := zvf.ObjectQuery{Attributes: attrs, LinkAttributes: edgeAttrs, Wire: wire}
	if done, err := refuseFound(w, func() error { return l.CheckObject(r.Context(), id, oq) }); done || err != nil {
		return err
	}
	o, err := l.ObjectWith(r.Context(), id, oq)
	if err != nil {
		return err
	}
	if o.Count > s.o.MaxVertices {
		return tooLarge(fmt.Sprintf("object %d has %d vertices, more than this server's %d per response", id, o.Count, s.o.MaxVertices))
	}
	meta := &payloadMeta{Kind: "object", Store: st.Name(), Level: l.N(), Dims: st.Info().Dims, VertexDType: o.Vertices.DType, Attributes: columnInfos(o.Attributes),
		Export: export, Arrow: am}
	if meta.EdgeAttributes, err = linkAttrInfos(l, edgeAttrs); err != nil {
		return err
	}
	if err := edgeColumnsFit(am, meta.EdgeAttributes); err != nil {
		return err
	}
	return s.streamPayload(w, r, rep, start, meta, nil, func(enc encoder, _ *bodyWriter) (*trailer, error) {
		if err := enc.batch(&zvf.Batch{Rows: int(o.Count), Vertices: o.Vertices, Attributes: o.Attributes}); err != nil {
			return nil, err
		}
		oattrs := map[string]any{}
		for _, c := range o.ObjectAttributes {
			oattrs[c.Name] = json.RawMessage(appendCell(nil, &c, 0))
		}
		return &trailer{Count: o.Count, Edges: o.Edges, WireEdges: o.WireEdges, Faces: o.Faces, FaceWidth: o.FaceWidth, EdgeAttributes: o.EdgeAttributes,
			Extra: map[string]any{"object_id": id, "fragment_counts": nonNilInts(o.FragmentCounts), "object_attributes": oattrs}}, nil
	})
}

func nonNilInts(v []int64) []int64 {
	if v == nil {
		return []int64{}
	}
	return v
}

func (s *Server) manifest(w http.ResponseWriter, r *http.Request) error {
	sub, err := s.subject(r, true, true)
	if err != nil {
		return err
	}
	st, l, id := sub.st, sub.l, sub.id
	// The manifest's fragment ranges are read from the vertex chunks;
	// the object is found in the index before.
	if done, err := s.jsonFound(w, r, st, func() error { return l.CheckObject(r.Context(), id, zvf.ObjectQuery{}) }); done || err != nil {
		return err
	}
	m, err := l.Manifest(r.Context(), id)
	if err != nil {
		return err
	}
	return s.writeJSON(w, r, st, m)
}

func (s *Server) objectLevels(w http.ResponseWriter, r *http.Request) error {
	sub, err := s.subject(r, false, true)
	if err != nil {
		return err
	}
	st, id := sub.st, sub.id
	levels, err := st.ObjectLevels(r.Context(), id)
	if err != nil {
		return err
	}
	return s.writeJSON(w, r, st, map[string]any{"object_id": id, "levels": levels})
}

func (s *Server) group(w http.ResponseWriter, r *http.Request) error {
	sub, err := s.subject(r, true, true)
	if err != nil {
		return err
	}
	st, l, id := sub.st, sub.l, sub.id
	ids, err := l.Group(r.Context(), id)
	if err != nil {
		return err
	}
	return s.writeJSON(w, r, st, map[string]any{"group_id": id, "level": l.N(), "count": len(ids), "object_ids": nonNilInts(ids)})
}

// ---- chunks ----

func (s *Server) chunks(w http.ResponseWriter, r *http.Request) error {
	sub, err := s.subject(r, true, false)
	if err != nil {
		return err
	}
	st, l := sub.st, sub.l
	if err := l.CheckListed(r.Context()); err != nil {
		return err
	}
	keys := make([]string, len(l.Keys()))
	for i, k := range l.Keys() {
		keys[i] = k.String()
	}
	info := l.Info()
	return s.writeJSON(w, r, st, map[string]any{"level": l.N(), "chunk_shape": info.ChunkShape, "count": len(keys), "chunks": keys})
}

func (s *Server) chunk(w http.ResponseWriter, r *http.Request) error {
	start := s.o.Now()
	sub, err := s.subject(r, true, false)
	if err != nil {
		return err
	}
	st, l := sub.st, sub.l
	ks := chi.URLParam(r, "key")
	key, err := zvf.ParseKey(ks)
	if err != nil {
		return badRequest(fmt.Sprintf("chunk key %q: use dotted integers like 0.1.-2", ks))
	}
	attrs, rep, done, err := s.payloadRequest(w, r, st, "chunk")
	if done || err != nil {
		return err
	}
	am, attrs, err := arrowSetup(r, rep, st, l, attrs, s.o.MaxVertices)
	if err != nil {
		return err
	}
	edgeAttrs, err := edgeAttrsSetup(query(r), rep, am, geometryOf(st))
	if err != nil {
		return err
	}
	edgeInfos, err := linkAttrInfos(l, edgeAttrs)
	if err != nil {
		return err
	}
	if err := edgeColumnsFit(am, edgeInfos); err != nil {
		return err
	}
	// The binary answer's edge attribute blocks follow an edges block,
	// and Arrow's table=edges is one: the chunk's links are those edges.
	// JSON and NDJSON give them once, as links.
	_, bin := rep.codec.(binaryCodec)
	asEdges := (bin && len(edgeInfos) > 0) || (am != nil && am.table == tableEdges)
	if asEdges && l.LinkWidth() > 2 {
		return unrepresentable(fmt.Sprintf("level %d's links are rows of %d vertices, not edges: f=%s has no place for their values; ask f=json or f=ndjson", l.N(), l.LinkWidth(), rep.codec.format()))
	}
	if done, err := refuseFound(w, func() error { return l.CheckChunk(key, attrs) }); done || err != nil {
		return err
	}
	t, err := l.Chunk(r.Context(), key, attrs)
	if err != nil {
		return err
	}
	meta := &payloadMeta{Kind: "chunk", Store: st.Name(), Level: l.N(), Dims: st.Info().Dims, VertexDType: t.Vertices.DType, Attributes: columnInfos(t.Attributes), Arrow: am,
		EdgeAttributes: edgeInfos}
	var edgeCols []zvf.EdgeColumn
	if len(meta.EdgeAttributes) > 0 {
		if edgeCols, err = l.ChunkLinkAttributes(r.Context(), key, edgeAttrs); err != nil {
			return err
		}
	}
	var edges []int64
	if asEdges {
		edges = t.Links
		if edges == nil {
			edges = []int64{} // no links: an empty edges block, or table
		}
	}
	return s.streamPayload(w, r, rep, start, meta, nil, func(enc encoder, _ *bodyWriter) (*trailer, error) {
		if err := enc.batch(&zvf.Batch{Chunk: key, Rows: t.Rows, Vertices: t.Vertices, Attributes: t.Attributes}); err != nil {
			return nil, err
		}
		frags := make([][]int64, len(t.Fragments))
		for i, f := range t.Fragments {
			frags[i] = []int64{f[0], f[1]}
		}
		extra := map[string]any{"key": key.String(), "fragments": frags}
		if t.LinkWidth > 0 {
			extra["links"] = pairs(t.Links, t.LinkWidth)
			extra["link_width"] = t.LinkWidth
		}
		return &trailer{Count: int64(t.Rows), Edges: edges, EdgeAttributes: edgeCols, Extra: extra}, nil
	})
}

// ---- in-process answers ----
