package api

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/cql2"
)

// The question routes: queryables (what a filter may name), count and
// density (how many vertices, and where), each with the bbox route's
// filter and sample.

// parseSelection reads filter=, filter-lang= and sample=. A filter that
// cannot be read is a bad-filter problem whose detail says what and
// where; an empty filter= is no filter.
func parseSelection(q queryArgs) (zvf.Selection, error) {
	var sel zvf.Selection
	if v := q.Get("sample"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0 && f <= 1) {
			return sel, badRequest(fmt.Sprintf("sample=%q: give a number above 0 and at most 1 (the share of objects kept)", v))
		}
		sel.Sample = f
	}
	lang := q.Get("filter-lang")
	if lang == "" {
		lang = cql2.LangText
	}
	if src := q.Get("filter"); src != "" {
		e, err := cql2.Parse(lang, src)
		if err != nil {
			return sel, err // a *cql2.Error: classify makes it a bad-filter problem
		}
		sel.Filter = e
	}
	return sel, nil
}

// boxRequest is what count and density take: the level (level=, default
// 0), the closed box, the selection (a filter the level cannot take is
// refused here, before anything is read) and the representation.
type boxRequest struct {
	st       *zvf.Store
	l        *zvf.Level
	min, max []float64
	sel      zvf.Selection
	rep      representation
}

func (s *Server) boxRequest(r *http.Request, codecs []codec) (br boxRequest, err error) {
	sub, err := s.subject(r, true, false)
	if err != nil {
		return br, err
	}
	br.st, br.l = sub.st, sub.l
	q := query(r)
	if br.min, br.max, err = parseBox(q, br.st.Info().Dims, partsOf(r.Context())); err != nil {
		return br, err
	}
	if br.sel, err = parseSelection(q); err != nil {
		return br, err
	}
	if br.sel.Filter != nil {
		if _, err := br.l.CompileFilter(br.sel.Filter); err != nil {
			return br, err
		}
	}
	br.rep, err = negotiate(r, codecs)
	return br, err
}

// ---- count ----

func (s *Server) count(w http.ResponseWriter, r *http.Request) error {
	br, err := s.boxRequest(r, jsonOnly(&s.text))
	if err != nil {
		return err
	}
	if s.notModifiedFound(w, r, s.etag(br.st, r, br.rep)) {
		return nil
	}
	n, err := br.l.Count(r.Context(), zvf.CountQuery{Min: br.min, Max: br.max, Selection: br.sel})
	if err != nil {
		return err
	}
	return s.writeJSON(w, r, nil, map[string]int64{"count": n})
}

// ---- density ----

// densityCodecs are the density formats, the server's preference first
// (each encoded by writeDensity).
func densityCodecs(text *batchers) []codec {
	return []codec{jsonCodec{text}, binaryCodec{}, arrowCodec{}}
}

// blockCounts is the binary format's block of a density's cell counts
// (6 is the quantized vertices block of bbox answers).
const blockCounts = 7

// densityHeader opens a binary density answer.
type densityHeader struct {
	Kind  string    `json:"kind"`
	Store string    `json:"store"`
	Level int       `json:"level"`
	Dims  int       `json:"dims"`
	Shape []int     `json:"shape"`
	Min   []float64 `json:"min"`
	Max   []float64 `json:"max"`
}

func (s *Server) density(w http.ResponseWriter, r *http.Request) error {
	start := s.o.Now()
	br, err := s.boxRequest(r, densityCodecs(&s.text))
	if err != nil {
		return err
	}
	shape, err := parseShape(query(r).Get("shape"), br.st.Info().Dims)
	if err != nil {
		return err
	}
	if s.notModifiedFound(w, r, s.etag(br.st, r, br.rep)) {
		return nil
	}
	counts, err := br.l.Density(r.Context(), zvf.DensityQuery{Min: br.min, Max: br.max, Shape: shape, Selection: br.sel})
	if err != nil {
		return err
	}
	body, err := s.newBody(w, partsOf(r.Context()), br.rep, start)
	if err != nil {
		return err
	}
	defer body.release()
	body.mem.hold(8 * int64(len(counts))) // the cells, and their binary copy, against the answers' budget
	h := densityHeader{Kind: "density", Store: br.st.Name(), Level: br.l.N(), Dims: len(shape), Shape: shape, Min: br.min, Max: br.max}
	if err := writeDensity(body.Writer, br.rep.codec.format(), &h, counts); err != nil {
		return err
	}
	return body.finish()
}

// parseShape reads shape=nx,ny,…: one positive count per axis, at most
// zvf.MaxDensityCells cells in all.
func parseShape(v string, dims int) ([]int, error) {
	if v == "" {
		return nil, badRequest(fmt.Sprintf("shape is required: %d comma-separated cell counts, one per axis", dims))
	}
	parts := strings.Split(v, ",")
	if len(parts) != dims {
		return nil, badRequest(fmt.Sprintf("shape needs %d numbers (one per axis), got %d", dims, len(parts)))
	}
	out := make([]int, len(parts))
	cells := 1
	for i, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 || n > zvf.MaxDensityCells {
			return nil, badRequest(fmt.Sprintf("shape[%d] = %q is not a whole number from 1 to %d", i, p, zvf.MaxDensityCells))
		}
		out[i] = n
		if cells *= n; cells > zvf.MaxDensityCells {
			return nil, badRequest(fmt.Sprintf("shape %s has more than %d cells (the most one density answers)", v, zvf.MaxDensityCells))
		}
	}
	return out, nil
}

// writeDensity encodes a density in format f: JSON {"shape", "counts"},
// or the binary container with one counts block (docs/binary-format.md).
func writeDensity(w *bufio.Writer, f string, h *densityHeader, counts []uint32) error {
	var total uint64
	for _, c := range counts {
		total += uint64(c)
	}
	switch f {
	case "bin":
		e := &binaryEncoder{w: w}
		hb, err := json.Marshal(h)
		if err != nil {
			return err
		}
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(hb)))
		if _, err := w.WriteString(binaryMagic); err != nil {
			return err
		}
		if _, err := w.Write(n[:]); err != nil {
			return err
		}
		if _, err := w.Write(hb); err != nil {
			return err
		}
		if _, err := w.Write(e.pad[:(8-len(hb)%8)%8]); err != nil {
			return err
		}
		buf := make([]byte, 0, 4*len(counts))
		for _, c := range counts {
			buf = binary.LittleEndian.AppendUint32(buf, c)
		}
		if err := e.writeBlock(blockCounts, uint32(len(counts)), buf); err != nil {
			return err
		}
		tb, err := json.Marshal(map[string]uint64{"count": total})
		if err != nil {
			return err
		}
		return e.writeBlock(blockTrailer, 0, tb)
	case "arrow":
		return writeDensityArrow(w, h, counts, total)
	case "json":
		b := make([]byte, 0, 64<<10)
		b = append(b, `{"shape":[`...)
		for i, n := range h.Shape {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(n), 10)
		}
		b = append(b, `],"counts":[`...)
		for i, c := range counts {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, uint64(c), 10)
			if len(b) > 60<<10 {
				if _, err := w.Write(b); err != nil {
					return err
				}
				b = b[:0]
			}
		}
		b = append(b, "]}\n"...)
		_, err := w.Write(b)
		return err
	}
	return fmt.Errorf("no density encoding for format %q", f) // a codec in densityCodecs without its case here
}

// ---- queryables ----

// schemaJSON answers a JSON Schema: application/schema+json, or
// application/json to a client that asks for that.
type schemaJSON struct{ jsonCodec }

func (schemaJSON) contentType() string { return "application/schema+json" }

// queryablesDoc is the queryables of a store as a JSON Schema (OGC API –
// Features Part 3).
type queryablesDoc struct {
	Schema      string                    `json:"$schema"`
	ID          string                    `json:"$id"`
	Type        string                    `json:"type"`
	Title       string                    `json:"title"`
	Description string                    `json:"description"`
	Properties  map[string]*queryableProp `json:"properties"`
	Additional  bool                      `json:"additionalProperties"`
}

// queryableProp is one property's schema; the x-zvf members say what
// JSON Schema cannot: the stored type and the levels that have it.
type queryableProp struct {
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	// Type is a JSON Schema type: a string, or a list of them where
	// levels differ (see join).
	Type    any      `json:"type"`
	Enum    []string `json:"enum,omitempty"`
	Minimum *bound   `json:"minimum,omitempty"`
	Maximum *bound   `json:"maximum,omitempty"`
	DType   string   `json:"x-zvf-dtype,omitempty"`
	Levels  []int    `json:"x-zvf-levels"`
	// ByLevel: each level's schema, where the levels' types differ.
	ByLevel map[int]levelSchema `json:"x-zvf-by-level,omitempty"`
	each    map[int]levelSchema // every level's schema so far (join)
}

// levelSchema is one level's schema of a property whose type differs
// between levels (x-zvf-by-level).
type levelSchema struct {
	Type    string   `json:"type"`
	Enum    []string `json:"enum,omitempty"`
	Minimum *bound   `json:"minimum,omitempty"`
	Maximum *bound   `json:"maximum,omitempty"`
	DType   string   `json:"x-zvf-dtype,omitempty"`
}

// levelsDiffer is what the description of a property whose type differs
// between levels says.
const levelsDiffer = "Its type differs between levels: this schema admits the values of every level; x-zvf-by-level gives each level's own, and level=N answers one level's."

// join adds level n's schema p of the same property to the schema of the
// levels before it, so that it says what every level holds: labels and
// integer ranges joined; where the stored types differ, a type every
// level's values fit (number for integers and floats; else the list of
// them), no single x-zvf-dtype, range or labels, and each level's own in
// ByLevel. (Before, the first level's schema stood for all.)
func (q *queryableProp) join(n int, p queryableProp) {
	if q.each == nil {
		q.each = map[int]levelSchema{q.Levels[0]: q.levelSchema()}
	}
	q.each[n] = p.levelSchema()
	q.Levels = append(q.Levels, n)
	for _, e := range p.Enum { // dictionaries may differ from level to level
		if !slices.Contains(q.Enum, e) {
			q.Enum = append(q.Enum, e)
		}
	}
	if q.ByLevel == nil && q.Type == p.Type && q.DType == p.DType {
		q.Minimum, q.Maximum = q.Minimum.min(p.Minimum), q.Maximum.max(p.Maximum)
		return
	}
	if q.ByLevel == nil {
		q.Description = strings.TrimSpace(q.Description + " " + levelsDiffer)
	}
	q.ByLevel = q.each
	var types []string
	for _, l := range q.each {
		if !slices.Contains(types, l.Type) {
			types = append(types, l.Type)
		}
	}
	slices.Sort(types)
	switch {
	case len(types) == 1:
		q.Type = types[0]
	case slices.Equal(types, []string{"integer", "number"}):
		q.Type = "number" // every integer is a number
	default:
		q.Type = types
	}
	q.DType, q.Minimum, q.Maximum = "", nil, nil
	if q.Type == "integer" { // integers of different types: the range of all
		first := true
		for _, l := range q.each {
			if first {
				q.Minimum, q.Maximum, first = l.Minimum, l.Maximum, false
			}
			q.Minimum, q.Maximum = q.Minimum.min(l.Minimum), q.Maximum.max(l.Maximum)
		}
	}
	if q.Type != "string" {
		q.Enum = nil // labels of some levels only: each level's are in ByLevel
	}
}

// levelSchema is q as one level's schema.
func (q *queryableProp) levelSchema() levelSchema {
	return levelSchema{Type: q.Type.(string), Enum: q.Enum, Minimum: q.Minimum, Maximum: q.Maximum, DType: q.DType}
}

// bound is an integer bound of any 64-bit type, printed exactly.
type bound struct {
	neg bool
	mag uint64
}

func (b *bound) MarshalJSON() ([]byte, error) {
	out := []byte{}
	if b.neg {
		out = append(out, '-')
	}
	return strconv.AppendUint(out, b.mag, 10), nil
}

// less reports whether b < c.
func (b *bound) less(c *bound) bool {
	switch {
	case b.neg != c.neg:
		return b.neg
	case b.neg:
		return b.mag > c.mag
	}
	return b.mag < c.mag
}

// min is the lesser of b and c, nil (unbounded) when either is.
func (b *bound) min(c *bound) *bound {
	if b == nil || c == nil {
		return nil
	}
	if c.less(b) {
		return c
	}
	return b
}

// max is the greater of b and c, nil (unbounded) when either is.
func (b *bound) max(c *bound) *bound {
	if b == nil || c == nil {
		return nil
	}
	if b.less(c) {
		return c
	}
	return b
}

func bigInt(v int64) *bound {
	if v < 0 {
		return &bound{neg: true, mag: uint64(-(v + 1)) + 1}
	}
	return &bound{mag: uint64(v)}
}

// intRange is the range of an integer data type.
func intRange(q cql2.Queryable) (*bound, *bound) {
	if q.Kind == cql2.Uint {
		if q.Bits == 0 || q.Bits == 64 {
			if q.Bits == 0 {
				return bigInt(0), bigInt(1) // bool
			}
			return bigInt(0), &bound{mag: math.MaxUint64}
		}
		return bigInt(0), bigInt(1<<q.Bits - 1)
	}
	if q.Bits == 64 {
		return bigInt(math.MinInt64), bigInt(math.MaxInt64)
	}
	return bigInt(-1 << (q.Bits - 1)), bigInt(1<<(q.Bits-1) - 1)
}

const queryablesNote = "The properties a filter= (CQL2, cql2-text or cql2-json) may name on this store's bbox, count and density routes. " +
	"Channel i (from 0) of a multi-channel vertex attribute is the property NAME[i]; object_id is the row's object; " +
	"group is membership of the row's object in a group (=, <>, IN, IS NULL). Object attributes are not queryable. " +
	"x-zvf-levels lists the levels that have each property: a filter naming one a level lacks is refused there, " +
	"and level=auto chooses among the levels that have them all."

func (s *Server) queryables(w http.ResponseWriter, r *http.Request) error {
	st, err := s.store(r)
	if err != nil {
		return err
	}
	levels := st.Levels()
	if v := query(r).Get("level"); v != "" {
		l, err := s.level(st, r)
		if err != nil {
			return err
		}
		levels = []int{l.N()}
	}
	rep, err := negotiate(r, []codec{schemaJSON{jsonCodec{&s.text}}, jsonCodec{&s.text}})
	if err != nil {
		return err
	}
	if s.notModifiedFound(w, r, s.etag(st, r, rep)) {
		return nil
	}
	doc := queryablesDoc{Schema: "https://json-schema.org/draft/2020-12/schema", ID: s.o.PublicURL + r.URL.Path,
		Type: "object", Title: st.Name(), Description: queryablesNote, Properties: map[string]*queryableProp{}, Additional: false}
	for _, n := range levels {
		l, err := st.Level(n)
		if err != nil {
			return err
		}
		info := l.Info()
		sch := l.Queryables()
		dtype := map[string]string{}
		for _, a := range info.VertexAttributes {
			dtype[a.Name] = a.DType
		}
		add := func(name string, p queryableProp) {
			if have, ok := doc.Properties[name]; ok {
				have.join(n, p)
				return
			}
			p.Title, p.Levels = name, []int{n}
			doc.Properties[name] = &p
		}
		for _, q := range sch.Queryables {
			p := queryableProp{DType: dtype[q.Name]}
			switch q.Kind {
			case cql2.Float:
				p.Type = "number"
			case cql2.Int, cql2.Uint:
				p.Type = "integer"
				p.Minimum, p.Maximum = intRange(q)
			case cql2.Categorical:
				// The null code's label is no value a row takes (such a
				// row is null), so no filter finds it.
				p.Type, p.Enum = "string", []string{}
				for code, label := range q.Labels {
					if q.NullCode == nil || *q.NullCode != int64(code) {
						p.Enum = append(p.Enum, label)
					}
				}
				p.Description = "categorical: compared by label; x-zvf-dtype is the type of its codes"
			default:
				p.Type = "string"
			}
			if q.Channels > 1 {
				for c := 0; c < q.Channels; c++ {
					pc := p
					pc.Description = fmt.Sprintf("channel %d of %d of vertex attribute %s", c, q.Channels, q.Name)
					add(fmt.Sprintf("%s[%d]", q.Name, c), pc)
				}
				continue
			}
			add(q.Name, p)
		}
		if sch.ObjectID {
			p := queryableProp{Type: "integer", Minimum: bigInt(0), Description: "the id of the row's object (null without one)"}
			if info.ObjectIndexLayout != "vlen_manifests_v2" && info.ObjectCount > 0 {
				p.Maximum = bigInt(info.ObjectCount - 1) // the manifest row is the id
			}
			add(cql2.PropObjectID, p)
		}
		if sch.Group {
			add(cql2.PropGroup, queryableProp{Type: "integer", Minimum: bigInt(0), Maximum: bigInt(info.GroupCount - 1),
				Description: "a group the row's object is a member of: group = g, group <> g, group IN (…), group IS NULL"})
		}
	}
	start := s.o.Now()
	body, err := s.newBody(w, partsOf(r.Context()), rep, start)
	if err != nil {
		return err
	}
	defer body.release()
	if err := json.NewEncoder(body).Encode(&doc); err != nil {
		return err
	}
	return body.finish()
}
