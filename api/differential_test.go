package api_test

// Differential checks of bbox answers over HTTP against brute force: the
// whole level read chunk by chunk (zvf.Level.Chunk) and cut to the box by
// the test itself, edges and faces restricted from the whole level's.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/memstore"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zarr"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// diffAnswer is one binary bbox page (or pages put together), decoded.
type diffAnswer struct {
	level    int
	dims     int
	dtype    string
	attrs    []diffAttr
	hasIDs   bool
	verts    [][]byte   // each row's vertex bytes
	ids      []int64    // per row
	attrRows [][][]byte // [attribute][row] bytes
	edges    [][2]int64
	faces    [][]int64
	count    int64
	offset   int64
	next     *string
	matched  *int64
	trailer  bool
}

type diffAttr struct {
	Name       string   `json:"name"`
	DType      string   `json:"dtype"`
	Channels   int      `json:"channels"`
	Categories []string `json:"categories"`
}

func dtypeSize(t *testing.T, dt string) int {
	d, err := zarr.ParseDataType(dt)
	if err != nil {
		t.Fatalf("dtype %q: %v", dt, err)
	}
	return d.Size
}

// value widens one coordinate of the given dtype to float64.
func diffValue(dt string, b []byte) float64 {
	switch dt {
	case "float32":
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	case "float64":
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	case "int8":
		return float64(int8(b[0]))
	case "uint8":
		return float64(b[0])
	case "int16":
		return float64(int16(binary.LittleEndian.Uint16(b)))
	case "uint16":
		return float64(binary.LittleEndian.Uint16(b))
	case "int32":
		return float64(int32(binary.LittleEndian.Uint32(b)))
	case "uint32":
		return float64(binary.LittleEndian.Uint32(b))
	case "int64":
		return float64(int64(binary.LittleEndian.Uint64(b)))
	case "uint64":
		return float64(binary.LittleEndian.Uint64(b))
	}
	panic(dt)
}

// parseDiffBin decodes a binary answer; with precision > 0 it accepts
// quantized vertex blocks, checks each value within precision of exact
// (the exact rows given) and substitutes the exact bytes.
func parseDiffBin(t *testing.T, b []byte, precision float64, exact [][]byte) diffAnswer {
	t.Helper()
	hdr, blocks := binBlocks(t, b)
	var h struct {
		Level  int        `json:"level"`
		Dims   int        `json:"dims"`
		DType  string     `json:"vertex_dtype"`
		Attrs  []diffAttr `json:"attribute_info"`
		HasIDs bool       `json:"has_object_ids"`
	}
	if err := json.Unmarshal(bytes.TrimRight(hdr, "\x00"), &h); err != nil {
		t.Fatalf("header %q: %v", hdr, err)
	}
	a := diffAnswer{level: h.Level, dims: h.Dims, dtype: h.DType, attrs: h.Attrs, hasIDs: h.HasIDs}
	a.attrRows = make([][][]byte, len(h.Attrs))
	vs := dtypeSize(t, h.DType) * h.Dims
	for _, bl := range blocks {
		if a.trailer {
			t.Fatalf("block of kind %d after the trailer", bl.kind)
		}
		switch bl.kind {
		case 1:
			if len(bl.payload) != int(bl.aux)*vs {
				t.Fatalf("vertices block: %d bytes for %d rows", len(bl.payload), bl.aux)
			}
			for i := 0; i < int(bl.aux); i++ {
				a.verts = append(a.verts, bl.payload[i*vs:(i+1)*vs])
			}
		case 6:
			if precision <= 0 {
				t.Fatal("quantized block without precision")
			}
			D := h.Dims
			B := int(bl.aux)
			R := (len(bl.payload) - 16*D) / (D * B / 8)
			off := make([]float64, D)
			sc := make([]float64, D)
			for k := range D {
				off[k] = math.Float64frombits(binary.LittleEndian.Uint64(bl.payload[8*k:]))
				sc[k] = math.Float64frombits(binary.LittleEndian.Uint64(bl.payload[8*D+8*k:]))
			}
			base := len(a.verts)
			for i := range R {
				r := base + i
				if r >= len(exact) {
					t.Fatalf("quantized row %d beyond the %d exact rows", r, len(exact))
				}
				for k := range D {
					p := 16*D + (k*R+i)*B/8
					var q uint64
					switch B {
					case 8:
						q = uint64(bl.payload[p])
					case 16:
						q = uint64(binary.LittleEndian.Uint16(bl.payload[p:]))
					case 32:
						q = uint64(binary.LittleEndian.Uint32(bl.payload[p:]))
					default:
						t.Fatalf("quantized bits %d", B)
					}
					got := off[k] + float64(q)*sc[k]
					want := diffValue(h.DType, exact[r][k*vs/D:])
					if math.Abs(got-want) > precision {
						t.Fatalf("row %d axis %d: %v decodes %v, more than %v away", r, k, want, got, precision)
					}
				}
				a.verts = append(a.verts, exact[r])
			}
		case 2:
			if len(bl.payload) != 8*int(bl.aux) {
				t.Fatalf("ids block: %d bytes for %d rows", len(bl.payload), bl.aux)
			}
			for i := 0; i < int(bl.aux); i++ {
				a.ids = append(a.ids, int64(binary.LittleEndian.Uint64(bl.payload[8*i:])))
			}
		case 3:
			at := h.Attrs[bl.aux]
			w := dtypeSize(t, at.DType) * at.Channels
			for i := 0; i+w <= len(bl.payload); i += w {
				a.attrRows[bl.aux] = append(a.attrRows[bl.aux], bl.payload[i:i+w])
			}
		case 4:
			for i := 0; i+8 <= len(bl.payload); i += 8 {
				a.edges = append(a.edges, [2]int64{int64(binary.LittleEndian.Uint32(bl.payload[i:])), int64(binary.LittleEndian.Uint32(bl.payload[i+4:]))})
			}
		case 5:
			c := int(bl.aux)
			for i := 0; i+4*c <= len(bl.payload); i += 4 * c {
				f := make([]int64, c)
				for k := range c {
					f[k] = int64(binary.LittleEndian.Uint32(bl.payload[i+4*k:]))
				}
				a.faces = append(a.faces, f)
			}
		case 15:
			a.trailer = true
			var tr struct {
				Count   int64   `json:"count"`
				Offset  int64   `json:"offset"`
				Next    *string `json:"next"`
				Matched *int64  `json:"number_matched"`
			}
			if err := json.Unmarshal(bl.payload, &tr); err != nil {
				t.Fatalf("trailer %q: %v", bl.payload, err)
			}
			a.count, a.offset, a.next, a.matched = tr.Count, tr.Offset, tr.Next, tr.Matched
		default:
			t.Fatalf("block kind %d", bl.kind)
		}
	}
	if !a.trailer {
		t.Fatal("no trailer")
	}
	if int64(len(a.verts)) != a.count {
		t.Fatalf("trailer count %d, %d rows", a.count, len(a.verts))
	}
	if h.HasIDs && len(a.ids) != len(a.verts) {
		t.Fatalf("%d ids for %d rows", len(a.ids), len(a.verts))
	}
	return a
}

// diffLevel is a whole level read by brute force.
type diffLevel struct {
	// stored and chunks: the level's rows (finite or not) and chunks.
	stored int64
	chunks int
	dims   int
	dtype  string
	whole  diffAnswer // the level's answer to an unbounded box
	vals   [][]float64
}

func (l *diffLevel) inBox(i int, lo, hi []float64) bool {
	for k, v := range l.vals[i] {
		if !(lo[k] <= v && v <= hi[k]) {
			return false
		}
	}
	return true
}

// expect is what the box should answer: the whole level's rows in the
// box, in order, and the whole level's edges and faces among them.
func (l *diffLevel) expect(lo, hi []float64, keep func(i int) bool) (rows []int, edges [][2]int64, faces [][]int64) {
	pos := map[int64]int64{}
	for i := range l.whole.verts {
		if l.inBox(i, lo, hi) && (keep == nil || keep(i)) {
			pos[int64(i)] = int64(len(rows))
			rows = append(rows, i)
		}
	}
	for _, e := range l.whole.edges {
		a, oka := pos[e[0]]
		b, okb := pos[e[1]]
		if oka && okb {
			edges = append(edges, [2]int64{a, b})
		}
	}
faces:
	for _, f := range l.whole.faces {
		g := make([]int64, len(f))
		for k, v := range f {
			p, ok := pos[v]
			if !ok {
				continue faces
			}
			g[k] = p
		}
		faces = append(faces, g)
	}
	return rows, edges, faces
}

func diffGet(t *testing.T, h http.Handler, path string) (int, http.Header, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	res := rec.Result()
	hdr := res.Header.Clone()
	for k, v := range res.Trailer {
		if hdr.Get(k) != "" {
			t.Fatalf("%s: %s both a header and a trailer", path, k)
		}
		hdr[k] = v
	}
	return rec.Code, hdr, rec.Body.Bytes()
}

// checkPageHeaders holds a bbox page's headers (or trailers) to its body.
func checkPageHeaders(t *testing.T, what string, hdr http.Header, pg diffAnswer) {
	t.Helper()
	if got := hdr.Get("X-Vertex-Count"); got != strconv.FormatInt(pg.count, 10) {
		t.Fatalf("%s: X-Vertex-Count %q, count %d", what, got, pg.count)
	}
	next := ""
	if pg.next != nil {
		next = *pg.next
	}
	if got := hdr.Get("X-Next-Cursor"); got != next {
		t.Fatalf("%s: X-Next-Cursor %q, next %q", what, got, next)
	}
	if link := hdr.Get("Link"); (link != "") != (next != "") || (next != "" && !strings.Contains(link, "cursor="+url.QueryEscape(next))) {
		t.Fatalf("%s: Link %q, next %q", what, link, next)
	}
	m := ""
	if pg.matched != nil {
		m = strconv.FormatInt(*pg.matched, 10)
	}
	if got := hdr.Get("X-Number-Matched"); got != m {
		t.Fatalf("%s: X-Number-Matched %q, number_matched %q", what, got, m)
	}
}

func fnum(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func fvec(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fnum(x)
	}
	return url.QueryEscape(strings.Join(s, ","))
}

func sortedEdges(es [][2]int64) [][2]int64 {
	out := slices.Clone(es)
	slices.SortFunc(out, func(a, b [2]int64) int {
		if c := a[0] - b[0]; c != 0 {
			return int(c)
		}
		return int(a[1] - b[1])
	})
	return out
}

func sortedFaces(fs [][]int64) [][]int64 {
	out := slices.Clone(fs)
	slices.SortFunc(out, slices.Compare)
	return out
}

// loadDiffLevel reads level n of s by brute force (every chunk, every
// row) and the server's answer to an unbounded box, and checks they hold
// the same rows in the same order.
func loadDiffLevel(t *testing.T, h http.Handler, s *zvf.Store, n int) *diffLevel {
	t.Helper()
	lv, err := s.Level(n)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := make([]float64, lv.Dims()), make([]float64, lv.Dims())
	for k := range lo {
		lo[k], hi[k] = -1e300, 1e300
	}
	path := fmt.Sprintf("/api/v1/stores/%s/bbox?min=%s&max=%s&level=%d&attributes=*&f=bin&limit=100000000", s.Name(), fvec(lo), fvec(hi), n)
	code, hdr, body := diffGet(t, h, path)
	if code != 200 {
		t.Fatalf("%s: %d %s", path, code, body)
	}
	whole := parseDiffBin(t, body, 0, nil)
	checkPageHeaders(t, path, hdr, whole)
	if whole.next != nil {
		t.Fatalf("whole level paged")
	}
	l := &diffLevel{dims: whole.dims, dtype: whole.dtype, whole: whole}
	vs := len(whole.verts[0]) / whole.dims
	for _, r := range whole.verts {
		v := make([]float64, whole.dims)
		for k := range v {
			v[k] = diffValue(whole.dtype, r[k*vs:])
		}
		l.vals = append(l.vals, v)
	}
	// Brute force: every chunk's rows in key order, the finite ones.
	keys := slices.Clone(lv.Keys())
	slices.SortFunc(keys, func(a, b zvf.Key) int { return slices.Compare(a, b) })
	code, _, lb := diffGet(t, h, fmt.Sprintf("/api/v1/stores/%s/levels/%d/chunks", s.Name(), n))
	var listing struct {
		Chunks []string `json:"chunks"`
		Count  int      `json:"count"`
	}
	if code != 200 || json.Unmarshal(lb, &listing) != nil || listing.Count != len(keys) || len(listing.Chunks) != len(keys) {
		t.Fatalf("chunk listing: %d %.300s, want %d keys", code, lb, len(keys))
	}
	var brute [][]byte
	for _, k := range keys {
		tile, err := lv.Chunk(context.Background(), k, nil)
		if err != nil {
			t.Fatalf("chunk %v: %v", k, err)
		}
		// The chunk route holds the same rows, non-finite ones too.
		ks := make([]string, len(k))
		for i, v := range k {
			ks[i] = strconv.FormatInt(v, 10)
		}
		cp := fmt.Sprintf("/api/v1/stores/%s/levels/%d/chunks/%s?f=bin&attributes=*", s.Name(), n, strings.Join(ks, "."))
		code, _, cb := diffGet(t, h, cp)
		if code != 200 {
			t.Fatalf("%s: %d %s", cp, code, cb)
		}
		ca := parseDiffBin(t, cb, 0, nil)
		code, _, qb := diffGet(t, h, cp+"&precision=0.125")
		if code != 200 {
			t.Fatalf("%s&precision=0.125: %d %s", cp, code, qb)
		}
		if q := parseDiffBin(t, qb, 0.125, ca.verts); len(q.verts) != len(ca.verts) {
			t.Fatalf("%s&precision=0.125: %d rows, exact %d", cp, len(q.verts), len(ca.verts))
		}
		if len(ca.verts) != tile.Rows || !bytes.Equal(bytes.Join(ca.verts, nil), tile.Vertices.Data[:len(bytes.Join(ca.verts, nil))]) {
			t.Fatalf("%s: %d rows, the chunk holds %d", cp, len(ca.verts), tile.Rows)
		}
		l.stored += int64(tile.Rows)
		l.chunks++
		w := len(tile.Vertices.Data) / max(tile.Rows, 1)
		for i := range tile.Rows {
			r := tile.Vertices.Data[i*w : (i+1)*w]
			finite := true
			for k := range whole.dims {
				if x := diffValue(whole.dtype, r[k*vs:]); math.IsNaN(x) || math.IsInf(x, 0) {
					finite = false
				}
			}
			if finite {
				brute = append(brute, r)
			}
		}
	}
	if len(brute) != len(whole.verts) {
		t.Fatalf("level %d: brute force %d rows, unbounded box %d", n, len(brute), len(whole.verts))
	}
	for i := range brute {
		if !bytes.Equal(brute[i], whole.verts[i]) {
			t.Fatalf("level %d row %d: brute force %x, unbounded box %x", n, i, brute[i], whole.verts[i])
		}
	}
	return l
}

// checkDiffBox asks for box [lo, hi] at level n in binary (whole,
// quantized, paged) and JSON and compares each with brute force.
func checkDiffBox(t *testing.T, h http.Handler, store string, n int, l *diffLevel, lo, hi []float64, limits []int, sel string, keep func(i int) bool) {
	t.Helper()
	rows, edges, faces := l.expect(lo, hi, keep)
	base := fmt.Sprintf("/api/v1/stores/%s/bbox?min=%s&max=%s&level=%d&attributes=*%s", store, fvec(lo), fvec(hi), n, sel)
	what := base
	check := func(got diffAnswer, what string) {
		t.Helper()
		if len(got.verts) != len(rows) {
			t.Fatalf("%s: %d rows, brute force %d", what, len(got.verts), len(rows))
		}
		for i, r := range rows {
			if !bytes.Equal(got.verts[i], l.whole.verts[r]) {
				t.Fatalf("%s: row %d %x, brute force %x", what, i, got.verts[i], l.whole.verts[r])
			}
			if l.whole.hasIDs && got.ids[i] != l.whole.ids[r] {
				t.Fatalf("%s: row %d id %d, want %d", what, i, got.ids[i], l.whole.ids[r])
			}
			for k := range l.whole.attrRows {
				if !bytes.Equal(got.attrRows[k][i], l.whole.attrRows[k][r]) {
					t.Fatalf("%s: row %d attribute %d differs", what, i, k)
				}
			}
		}
		if ge, we := sortedEdges(got.edges), sortedEdges(edges); !slices.Equal(ge, we) {
			t.Fatalf("%s: %d edges, brute force %d\n got %v\nwant %v", what, len(ge), len(we), trunc(ge), trunc(we))
		}
		if gf, wf := sortedFaces(got.faces), sortedFaces(faces); !slices.EqualFunc(gf, wf, slices.Equal) {
			t.Fatalf("%s: %d faces, brute force %d", what, len(gf), len(wf))
		}
	}
	code, hdr, body := diffGet(t, h, base+"&f=bin")
	if code != 200 {
		t.Fatalf("%s: %d %s", what, code, body)
	}
	whole := parseDiffBin(t, body, 0, nil)
	checkPageHeaders(t, what, hdr, whole)
	check(whole, what+" bin")
	if whole.next != nil || whole.offset != 0 {
		t.Fatalf("%s: unpaged answer with next %v offset %d", what, *whole.next, whole.offset)
	}
	if whole.matched != nil && *whole.matched != int64(len(rows)) {
		t.Fatalf("%s: number_matched %d, want %d", what, *whole.matched, len(rows))
	}
	// count
	cpath := strings.Replace(base, "/bbox?", "/count?", 1)
	cpath = strings.Replace(cpath, "&attributes=*", "", 1)
	code, _, body = diffGet(t, h, cpath)
	var c struct{ Count int64 }
	if code != 200 || json.Unmarshal(body, &c) != nil || c.Count != int64(len(rows)) {
		t.Fatalf("%s: %d %s, want count %d", cpath, code, body, len(rows))
	}
	// precision
	for _, p := range []float64{0.5, 1e-3} {
		code, _, body = diffGet(t, h, base+"&f=bin&precision="+fnum(p))
		if code != 200 {
			t.Fatalf("%s precision %v: %d %s", what, p, code, body)
		}
		check(parseDiffBin(t, body, p, whole.verts), fmt.Sprintf("%s precision %v", what, p))
	}
	// JSON: same rows, ids and connectivity.
	code, _, body = diffGet(t, h, base)
	if code != 200 {
		t.Fatalf("%s json: %d %s", what, code, body)
	}
	var js struct {
		Vertices [][]json.Number              `json:"vertices"`
		Attrs    map[string][]json.RawMessage `json:"attributes"`
		IDs      []int64                      `json:"object_ids"`
		Edges    [][2]int64                   `json:"edges"`
		Faces    [][]int64                    `json:"faces"`
		Count    int64                        `json:"count"`
		Next     *string                      `json:"next"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&js); err != nil {
		t.Fatalf("%s json: %v", what, err)
	}
	if len(js.Vertices) != len(rows) || js.Count != int64(len(rows)) || js.Next != nil {
		t.Fatalf("%s json: %d rows count %d, want %d", what, len(js.Vertices), js.Count, len(rows))
	}
	for i, r := range rows {
		for k, num := range js.Vertices[i] {
			bits := 64
			if l.dtype == "float32" {
				bits = 32
			}
			v, err := strconv.ParseFloat(num.String(), bits)
			want := l.vals[r][k]
			if err != nil || (v != want && !(math.IsNaN(v) && math.IsNaN(want))) {
				t.Fatalf("%s json: row %d axis %d %s, want %v", what, i, k, num, want)
			}
		}
		if l.whole.hasIDs && js.IDs[i] != l.whole.ids[r] {
			t.Fatalf("%s json: row %d id %d want %d", what, i, js.IDs[i], l.whole.ids[r])
		}
		for k, a := range l.whole.attrs {
			if vs := js.Attrs[a.Name]; len(vs) != len(rows) || !jsonAttrIs(vs[i], a, l.whole.attrRows[k][r]) {
				t.Fatalf("%s json: row %d attribute %s: %d values, want %x", what, i, a.Name, len(vs), l.whole.attrRows[k][r])
			}
		}
	}
	if ge, we := sortedEdges(js.Edges), sortedEdges(edges); !slices.Equal(ge, we) {
		t.Fatalf("%s json: %d edges, brute force %d", what, len(ge), len(we))
	}
	if gf, wf := sortedFaces(js.Faces), sortedFaces(faces); !slices.EqualFunc(gf, wf, slices.Equal) {
		t.Fatalf("%s json: %d faces, brute force %d", what, len(gf), len(wf))
	}
	// JSON and NDJSON pages of 7.
	for _, format := range []string{"json", "ndjson"} {
		if sel != "" || len(rows) > 2000 {
			break
		}
		pages := fetchPages(t, h, base+"&limit=7", format)
		all := join(t, pages)
		if all.count != int64(len(rows)) || len(all.cols["vertices"]) != len(rows) {
			t.Fatalf("%s %s pages: %d rows, want %d", what, format, all.count, len(rows))
		}
		for i, r := range rows {
			var vs []json.Number
			dec := json.NewDecoder(strings.NewReader(all.cols["vertices"][i]))
			dec.UseNumber()
			if err := dec.Decode(&vs); err != nil {
				t.Fatal(err)
			}
			for k, num := range vs {
				bits := 64
				if l.dtype == "float32" {
					bits = 32
				}
				if v, err := strconv.ParseFloat(num.String(), bits); err != nil || v != l.vals[r][k] {
					t.Fatalf("%s %s pages: row %d axis %d %s, want %v", what, format, i, k, num, l.vals[r][k])
				}
			}
			if l.whole.hasIDs && all.cols["ids"][i] != strconv.FormatInt(l.whole.ids[r], 10) {
				t.Fatalf("%s %s pages: row %d id %s, want %d", what, format, i, all.cols["ids"][i], l.whole.ids[r])
			}
		}
		var ge [][2]int64
		for _, e := range all.edges {
			ge = append(ge, [2]int64{e[0], e[1]})
		}
		if ge, we := sortedEdges(ge), sortedEdges(edges); !slices.Equal(ge, we) {
			t.Fatalf("%s %s pages: %d edges, brute force %d", what, format, len(ge), len(we))
		}
		if gf, wf := sortedFaces(all.faces), sortedFaces(faces); !slices.EqualFunc(gf, wf, slices.Equal) {
			t.Fatalf("%s %s pages: %d faces, brute force %d", what, format, len(gf), len(wf))
		}
	}
	// Pages.
	for _, lim := range limits {
		if len(rows)/lim > 60 {
			continue // pages enough at the other limits
		}
		var all diffAnswer
		cursor := ""
		for page := 0; ; page++ {
			p := fmt.Sprintf("%s&f=bin&limit=%d", base, lim)
			if cursor != "" {
				p += "&cursor=" + url.QueryEscape(cursor)
			}
			code, hdr, body := diffGet(t, h, p)
			if code != 200 {
				t.Fatalf("%s page %d: %d %s", p, page, code, body)
			}
			pg := parseDiffBin(t, body, 0, nil)
			checkPageHeaders(t, p, hdr, pg)
			if pg.offset != int64(len(all.verts)) {
				t.Fatalf("%s limit %d page %d: offset %d, %d rows before", what, lim, page, pg.offset, len(all.verts))
			}
			if len(pg.verts) > lim {
				t.Fatalf("%s limit %d page %d: %d rows", what, lim, page, len(pg.verts))
			}
			end := pg.offset + int64(len(pg.verts))
			for _, e := range pg.edges {
				if m := max(e[0], e[1]); m < pg.offset || m >= end {
					t.Fatalf("%s limit %d page %d [%d,%d): edge %v", what, lim, page, pg.offset, end, e)
				}
			}
			for _, f := range pg.faces {
				if m := slices.Max(f); m < pg.offset || m >= end {
					t.Fatalf("%s limit %d page %d [%d,%d): face %v", what, lim, page, pg.offset, end, f)
				}
			}
			if pg.matched != nil && *pg.matched != int64(len(rows)) {
				t.Fatalf("%s limit %d page %d: number_matched %d, want %d", what, lim, page, *pg.matched, len(rows))
			}
			all.verts = append(all.verts, pg.verts...)
			all.ids = append(all.ids, pg.ids...)
			if all.attrRows == nil {
				all.attrRows = make([][][]byte, len(pg.attrRows))
			}
			for k := range pg.attrRows {
				all.attrRows[k] = append(all.attrRows[k], pg.attrRows[k]...)
			}
			all.edges = append(all.edges, pg.edges...)
			all.faces = append(all.faces, pg.faces...)
			if pg.next == nil {
				if pg.matched == nil {
					t.Fatalf("%s limit %d: last page without number_matched", what, lim)
				}
				break
			}
			if len(pg.verts) == 0 {
				t.Fatalf("%s limit %d page %d: empty page with a next", what, lim, page)
			}
			if page > len(rows)+2 {
				t.Fatalf("%s limit %d: %d pages for %d rows", what, lim, page, len(rows))
			}
			cursor = *pg.next
			if len(cursor) > 1024 {
				t.Fatalf("%s: a cursor of %d characters", what, len(cursor))
			}
		}
		check(all, fmt.Sprintf("%s limit %d pages", what, lim))
	}
}

func trunc[T any](s []T) []T {
	if len(s) > 20 {
		return s[:20]
	}
	return s
}

// diffBoxes are boxes over a level: random ones in the bounds, ones on
// chunk and bin borders, degenerate ones on a vertex, ones outside.
func diffBoxes(rng *rand.Rand, l *diffLevel, lo, hi, chunk, bin []float64) [][2][]float64 {
	var out [][2][]float64
	d := len(lo)
	mk := func(f func(k int) (float64, float64)) {
		a, b := make([]float64, d), make([]float64, d)
		for k := range d {
			a[k], b[k] = f(k)
		}
		out = append(out, [2][]float64{a, b})
	}
	for range 6 {
		mk(func(k int) (float64, float64) {
			x, y := lo[k]+rng.Float64()*(hi[k]-lo[k]), lo[k]+rng.Float64()*(hi[k]-lo[k])
			return min(x, y), max(x, y)
		})
	}
	if len(l.vals) == 0 {
		return out
	}
	// Around vertices: boxes of 5-40% of the bounds.
	for range 8 {
		v := l.vals[rng.IntN(len(l.vals))]
		mk(func(k int) (float64, float64) {
			w := (hi[k] - lo[k]) * (0.05 + 0.35*rng.Float64())
			c := v[k] + (rng.Float64()-0.5)*w
			return c - w/2, c + w/2
		})
	}
	for _, g := range [][]float64{chunk, bin} {
		if g == nil {
			continue
		}
		// The cell of a vertex and its neighbours, borders exact.
		for range 5 {
			v := l.vals[rng.IntN(len(l.vals))]
			mk(func(k int) (float64, float64) {
				i := math.Floor(v[k]/g[k]) - math.Floor(rng.Float64()*2)
				j := i + 1 + math.Floor(rng.Float64()*2)
				return i * g[k], j * g[k]
			})
		}
		// A slab on one border through a vertex's cell.
		v := l.vals[rng.IntN(len(l.vals))]
		mk(func(k int) (float64, float64) {
			if k == 0 {
				b := math.Round(v[k]/g[k]) * g[k]
				return b, b
			}
			return lo[k], hi[k]
		})
		// Boxes ending exactly on a border.
		mk(func(k int) (float64, float64) {
			b := math.Round(v[k]/g[k]) * g[k]
			return b - g[k]/2, b
		})
		mk(func(k int) (float64, float64) {
			b := math.Round(v[k]/g[k]) * g[k]
			return b, b + g[k]/2
		})
	}
	for range 3 {
		v := l.vals[rng.IntN(len(l.vals))]
		mk(func(k int) (float64, float64) { return v[k], v[k] })
		w := l.vals[rng.IntN(len(l.vals))]
		mk(func(k int) (float64, float64) { return min(v[k], w[k]), max(v[k], w[k]) })
	}
	mk(func(k int) (float64, float64) { return hi[k] + 1, hi[k] + 2 })
	mk(func(k int) (float64, float64) { return lo[k] - 10, lo[k] })
	mk(func(k int) (float64, float64) { return lo[k], hi[k] })
	return out
}

type diffDescriptor struct {
	Geometry []string     `json:"geometry_types"`
	Bounds   [2][]float64 `json:"bounds"`
	Levels   []struct {
		Level      int       `json:"level"`
		ChunkShape []float64 `json:"chunk_shape"`
		BinShape   []float64 `json:"bin_shape"`
		// SharedFragments: an object's manifest may name a fragment
		// other objects name too, and name it more than once.
		SharedFragments bool  `json:"shared_fragments"`
		VertexCount     int64 `json:"vertex_count"`
		ChunkCount      int   `json:"chunk_count"`
	} `json:"levels"`
}

func runDiff(t *testing.T, stores []*zvf.Store) {
	srv := apitest.New(t, api.Options{Stores: stores})
	h := srv.Handler()
	for _, s := range stores {
		t.Run(s.Name(), func(t *testing.T) {
			code, _, body := diffGet(t, h, "/api/v1/stores/"+s.Name())
			var d diffDescriptor
			if code != 200 || json.Unmarshal(body, &d) != nil {
				t.Fatalf("descriptor %d %s", code, body)
			}
			rng := rand.New(rand.NewPCG(7, uint64(len(s.Name()))))
			for _, lv := range d.Levels {
				l := loadDiffLevel(t, h, s, lv.Level)
				if lv.VertexCount != l.stored || lv.ChunkCount != l.chunks {
					t.Fatalf("level %d: descriptor says %d vertices in %d chunks; the chunks hold %d in %d", lv.Level, lv.VertexCount, lv.ChunkCount, l.stored, l.chunks)
				}
				zl, err := s.Level(lv.Level)
				if err != nil {
					t.Fatal(err)
				}
				checkDiffObjects(t, h, zl, s.Name(), lv.Level, l, lv.SharedFragments)
				for _, b := range diffBoxes(rng, l, d.Bounds[0], d.Bounds[1], lv.ChunkShape, lv.BinShape) {
					checkDiffBox(t, h, s.Name(), lv.Level, l, b[0], b[1], []int{1, 7, 100}, "", nil)
					for _, sel := range l.selections() {
						checkDiffBox(t, h, s.Name(), lv.Level, l, b[0], b[1], []int{5, 40}, sel.q, sel.keep)
					}
					checkDiffDensity(t, h, s.Name(), lv.Level, l, b[0], b[1])
					checkDiffGeoArrow(t, h, s.Name(), lv.Level, l, d.Geometry[0], b[0], b[1])
				}
			}
		})
	}
}

func TestDifferentialReferenceStores(t *testing.T) {
	t.Parallel()
	ch := cache.New(256 << 20)
	var stores []*zvf.Store
	for _, n := range []string{"points_bins", "points_pyramid", "polylines", "graph", "skeleton", "mesh",
		"quirk_points_objects_bins", "points_pyramid_sharded", "polylines_sharded", "graph_sharded", "points_bins_zstd", "points_bins_blosc"} {
		stores = append(stores, apitest.Open(t, filepath.Join(fixtures, n+".zarrvectors"), n, ch))
	}
	runDiff(t, stores)
}

func TestDifferential09Stores(t *testing.T) {
	t.Parallel()
	ch := cache.New(256 << 20)
	var stores []*zvf.Store
	for _, n := range []string{"graph_v09", "mesh_sharded_v09", "mesh_v09", "points_pyramid_v09", "skeleton_v09", "streamlines_v09", "streamlines_zstd_v09"} {
		stores = append(stores, apitest.Open(t, filepath.Join("../testdata/zvf-0.9", n+".zarrvectors"), n, ch))
	}
	runDiff(t, stores)
}

// TestDifferentialNonFiniteRows: stores whose level 0 holds rows with NaN
// and infinite coordinates (none of which is in any box) answer as brute
// force does: those rows, and the edges and faces that name them, left
// out; counts agree.
func TestDifferentialNonFiniteRows(t *testing.T) {
	t.Parallel()
	ch := cache.New(256 << 20)
	var stores []*zvf.Store
	for _, n := range []string{"points_bins", "polylines", "graph", "skeleton", "mesh", "points_pyramid"} {
		dir := zvftest.CopyTree(t, filepath.Join(fixtures, n+".zarrvectors"))
		files, err := filepath.Glob(filepath.Join(dir, "0", "vertices", "*", "c", "0"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: %v files, %v", n, len(files), err)
		}
		slices.Sort(files)
		for i, f := range files {
			if i%3 != 0 {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			rows := len(b) / 12
			nan, inf := math.Float32bits(float32(math.NaN())), math.Float32bits(float32(math.Inf(1)))
			put := func(r, k int, v uint32) {
				if r >= 0 && r < rows {
					binary.LittleEndian.PutUint32(b[12*r+4*k:], v)
				}
			}
			put(0, 0, nan)
			put(rows/2, 0, nan)
			put(rows/2, 1, nan)
			put(rows/2, 2, nan)
			put(rows-1, 1, inf)
			put(rows/3, 2, inf|1<<31)
			if err := os.WriteFile(f, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		stores = append(stores, apitest.Open(t, dir, n, ch))
	}
	runDiff(t, stores)
}

func splitMix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

type diffSel struct {
	q    string
	keep func(i int) bool
}

// sampleKeeps is docs/filters.md's sampling rule for whole-level row i.
func (l *diffLevel) sampleKeeps(i int, f float64) bool {
	var h uint64
	if l.whole.hasIDs && l.whole.ids[i] >= 0 {
		h = splitMix64(uint64(l.whole.ids[i]))
	} else {
		for _, v := range l.vals[i] {
			h = splitMix64(h ^ math.Float64bits(v))
		}
	}
	return float64(h)/(1<<64) < f
}

// selections are filters and samples with their brute-force meaning.
func (l *diffLevel) selections() []diffSel {
	out := []diffSel{{"&sample=0.5", func(i int) bool { return l.sampleKeeps(i, 0.5) }}}
	if l.whole.hasIDs {
		out = append(out,
			diffSel{"&filter=" + url.QueryEscape("object_id < 20"), func(i int) bool { return l.whole.ids[i] < 20 }},
			diffSel{"&filter=" + url.QueryEscape("object_id >= 5") + "&sample=0.3", func(i int) bool { return l.whole.ids[i] >= 5 && l.sampleKeeps(i, 0.3) }})
	}
	// A categorical attribute: rows of one label.
	for k, a := range l.whole.attrs {
		if len(a.Categories) == 0 || a.Channels != 1 || len(l.whole.attrRows[k]) == 0 {
			continue
		}
		code := len(a.Categories) / 2
		rows := l.whole.attrRows[k]
		out = append(out, diffSel{"&filter=" + url.QueryEscape(fmt.Sprintf("%s = '%s'", a.Name, a.Categories[code])), func(i int) bool {
			return diffValue(a.DType, rows[i]) == float64(code)
		}})
		break
	}
	// An integer attribute.
	for k, a := range l.whole.attrs {
		if len(a.Categories) > 0 || a.Channels != 1 || !strings.Contains(a.DType, "int") || len(l.whole.attrRows[k]) == 0 {
			continue
		}
		rows := l.whole.attrRows[k]
		thr := diffValue(a.DType, rows[len(rows)/2])
		out = append(out, diffSel{"&filter=" + url.QueryEscape(fmt.Sprintf("%s >= %s OR %s = %s", a.Name, fnum(thr), a.Name, fnum(thr-3))), func(i int) bool {
			v := diffValue(a.DType, rows[i])
			return v >= thr || v == thr-3
		}})
		break
	}
	// A float32 single-channel attribute, when there is one.
	for k, a := range l.whole.attrs {
		if a.DType != "float32" || a.Channels != 1 || len(l.whole.attrRows[k]) == 0 {
			continue
		}
		vals := make([]float64, len(l.whole.attrRows[k]))
		for i, r := range l.whole.attrRows[k] {
			vals[i] = diffValue("float32", r)
		}
		sorted := slices.Clone(vals)
		slices.Sort(sorted)
		thr := sorted[len(sorted)/2]
		out = append(out, diffSel{"&filter=" + url.QueryEscape(fmt.Sprintf("%s > %s", a.Name, fnum(thr))), func(i int) bool { return vals[i] > thr }})
		break
	}
	return out
}

// checkDiffDensity holds the density route to docs/filters.md's cells
// over brute force.
func checkDiffDensity(t *testing.T, h http.Handler, store string, n int, l *diffLevel, lo, hi []float64) {
	t.Helper()
	shape := []int{3, 2, 5, 2}[:len(lo)]
	ss := make([]string, len(shape))
	cells := 1
	for i, v := range shape {
		ss[i] = strconv.Itoa(v)
		cells *= v
	}
	path := fmt.Sprintf("/api/v1/stores/%s/density?min=%s&max=%s&level=%d&shape=%s", store, fvec(lo), fvec(hi), n, strings.Join(ss, ","))
	code, _, body := diffGet(t, h, path)
	if code != 200 {
		t.Fatalf("%s: %d %s", path, code, body)
	}
	var d struct {
		Counts []int64 `json:"counts"`
	}
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	want := make([]int64, cells)
	rows, _, _ := l.expect(lo, hi, nil)
	for _, r := range rows {
		want[gridCell(l.vals[r], lo, hi, shape)]++
	}
	if !slices.Equal(d.Counts, want) {
		t.Fatalf("%s: counts %v, brute force %v", path, d.Counts, want)
	}
}

// checkDiffObjects holds the object route to the whole level: an
// object's finite rows are, as a multiset, the level's rows whose object
// id is the object's, and its edges and faces (as coordinates) those of
// the level among them.
func checkDiffObjects(t *testing.T, h http.Handler, lvl *zvf.Level, store string, n int, l *diffLevel, sharedLevel bool) {
	t.Helper()
	if !l.whole.hasIDs {
		return
	}
	byID := map[int64][]int{}
	var ids []int64
	for i, id := range l.whole.ids {
		if id < 0 {
			continue
		}
		if _, ok := byID[id]; !ok {
			ids = append(ids, id)
		}
		byID[id] = append(byID[id], i)
	}
	slices.Sort(ids)
	if len(ids) > 12 {
		ids = append(ids[:6], ids[len(ids)-6:]...)
	}
	finite := func(r []byte) bool {
		w := len(r) / l.dims
		for k := range l.dims {
			if x := diffValue(l.dtype, r[k*w:]); math.IsNaN(x) || math.IsInf(x, 0) {
				return false
			}
		}
		return true
	}
	for _, id := range ids {
		path := fmt.Sprintf("/api/v1/stores/%s/objects/%d?level=%d&f=bin", store, id, n)
		code, _, body := diffGet(t, h, path)
		if code != 200 {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		obj := parseDiffBin(t, body, 0, nil)
		checkDiffManifest(t, h, lvl, store, n, id, obj)
		code, _, qb := diffGet(t, h, path+"&precision=0.25")
		if code != 200 {
			t.Fatalf("%s&precision=0.25: %d %s", path, code, qb)
		}
		if q := parseDiffBin(t, qb, 0.25, obj.verts); len(q.verts) != len(obj.verts) || !slices.Equal(q.ids, obj.ids) || !slices.Equal(q.edges, obj.edges) {
			t.Fatalf("%s&precision=0.25: %d rows, exact %d", path, len(q.verts), len(obj.verts))
		}
		var got, want []string
		for _, r := range obj.verts {
			if finite(r) {
				got = append(got, string(r))
			}
		}
		in := map[int64]bool{}
		for _, i := range byID[id] {
			want = append(want, string(l.whole.verts[i]))
			in[int64(i)] = true
		}
		slices.Sort(got)
		slices.Sort(want)
		// At levels with shared fragments (a coarse level's, a mesh's
		// whole-chunk fragment) an object holds rows whose object id
		// names another object (the first whose manifest names the
		// fragment): then its rows hold the level's rows of the object.
		shared := sharedLevel
		if shared {
			got = slices.Compact(got)
		}
		for _, r := range got {
			if !slices.Contains(want, r) {
				shared = true
				break
			}
		}
		if !shared && !slices.Equal(got, want) || shared && !multisetContains(got, want) {
			t.Fatalf("%s: %d finite rows, the level's rows of object %d: %d", path, len(got), id, len(want))
		}
		if shared {
			continue
		}
		okRow := func(i int64) bool { return finite(obj.verts[i]) }
		var ge, we []string
		for _, e := range obj.edges {
			if okRow(e[0]) && okRow(e[1]) {
				ge = append(ge, string(obj.verts[e[0]])+"|"+string(obj.verts[e[1]]))
			}
		}
		for _, e := range l.whole.edges {
			if in[e[0]] && in[e[1]] {
				we = append(we, string(l.whole.verts[e[0]])+"|"+string(l.whole.verts[e[1]]))
			}
		}
		slices.Sort(ge)
		slices.Sort(we)
		if !slices.Equal(ge, we) {
			t.Fatalf("%s: %d edges among finite rows, the level's among object %d's rows: %d", path, len(ge), id, len(we))
		}
		var gf, wf []string
	faces:
		for _, f := range obj.faces {
			var b strings.Builder
			for _, v := range f {
				if !okRow(v) {
					continue faces
				}
				b.Write(obj.verts[v])
				b.WriteByte('|')
			}
			gf = append(gf, b.String())
		}
	wfaces:
		for _, f := range l.whole.faces {
			var b strings.Builder
			for _, v := range f {
				if !in[v] {
					continue wfaces
				}
				b.Write(l.whole.verts[v])
				b.WriteByte('|')
			}
			wf = append(wf, b.String())
		}
		slices.Sort(gf)
		slices.Sort(wf)
		if !slices.Equal(gf, wf) {
			t.Fatalf("%s: %d faces among finite rows, the level's among object %d's rows: %d", path, len(gf), id, len(wf))
		}
	}
}

// multisetContains reports whether sorted big holds every element of
// sorted small, as many times.
func multisetContains(big, small []string) bool {
	i := 0
	for _, x := range small {
		for i < len(big) && big[i] < x {
			i++
		}
		if i == len(big) || big[i] != x {
			return false
		}
		i++
	}
	return true
}

// TestDifferentialSyntheticStores: stores written by zvf/writer with
// small chunks and bins (single-row and empty ones), vertices exactly on
// chunk and bin borders, negative coordinates, lines that cross borders
// many times, 2-D and 4-D points, and a pyramid.
func TestDifferentialSyntheticStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := memstore.New()
	rng := rand.New(rand.NewPCG(11, 12))
	// A coordinate on a 2.5 lattice half the time (on a bin or chunk
	// border), else anywhere in [-20, 20).
	coord := func() float32 {
		if rng.IntN(2) == 0 {
			return float32(rng.IntN(17)-8) * 2.5
		}
		return float32(rng.Float64()*40 - 20)
	}
	write := func(name string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for _, d := range []int{2, 3, 4} {
		pc := &writer.PointCloud{}
		var val []float32
		for i := range 400 {
			for range d {
				pc.Positions = append(pc.Positions, coord())
			}
			pc.ObjectIDs = append(pc.ObjectIDs, int64(i%37))
			val = append(val, float32(rng.Float64()))
		}
		pc.Attributes = []writer.Attribute{writer.Float32Attribute("v", 1, val)}
		cs, bs := make([]float64, d), make([]float64, d)
		for k := range d {
			cs[k], bs[k] = 10, 5
		}
		_, err := writer.WritePoints(ctx, mem, fmt.Sprintf("pts%dd", d), pc, writer.Options{ChunkShape: cs, BinShape: bs,
			Pyramid: []writer.PyramidLevel{{Coarsen: 2}, {Coarsen: 4, ChunkScale: 2}}})
		write("points", err)
	}
	// Bins without objects, one row in most chunks.
	sparse := &writer.PointCloud{}
	for range 60 {
		sparse.Positions = append(sparse.Positions, coord(), coord(), coord())
	}
	_, err := writer.WritePoints(ctx, mem, "sparse", sparse, writer.Options{ChunkShape: []float64{2.5, 2.5, 2.5}, BinShape: []float64{1.25, 1.25, 1.25}})
	write("sparse", err)
	// Zig-zag lines across chunk borders.
	pl := &writer.Polylines{Offsets: []int{0}}
	var fa []float32
	for s := range 25 {
		n := 10 + rng.IntN(60)
		for k := range n {
			x := float32(-20 + float64(k)*40/float64(n))
			y := float32(10 * math.Sin(float64(k+s)))
			z := coord()
			if k%5 == 0 {
				y = float32(math.Round(float64(y)/5) * 5)
			}
			pl.Positions = append(pl.Positions, x, y, z)
			fa = append(fa, float32(rng.Float64()))
		}
		pl.Offsets = append(pl.Offsets, len(pl.Positions)/3)
	}
	pl.Attributes = []writer.Attribute{writer.Float32Attribute("fa", 1, fa)}
	_, err = writer.WritePolylines(ctx, mem, "zigzag", pl, writer.Options{ChunkShape: []float64{10, 10, 10}, BinShape: []float64{5, 5, 5}})
	write("zigzag", err)
	// A random graph in several objects, and a skeleton.
	for _, skel := range []bool{false, true} {
		g := &writer.Graph{Skeleton: skel}
		for i := range 200 {
			g.Positions = append(g.Positions, coord(), coord(), coord())
			g.ObjectIDs = append(g.ObjectIDs, int64(i/50))
			if i%50 != 0 {
				p := int64(i/50*50 + rng.IntN(i%50))
				g.Edges = append(g.Edges, int64(i), p)
			}
		}
		if !skel {
			for range 40 {
				o := rng.IntN(4) * 50
				g.Edges = append(g.Edges, int64(o+rng.IntN(50)), int64(o+rng.IntN(50)))
			}
		}
		name := map[bool]string{false: "graph", true: "skel"}[skel]
		_, err = writer.WriteGraph(ctx, mem, name, g, writer.Options{ChunkShape: []float64{10, 10, 10}})
		write(name, err)
	}
	// A triangulated sheet folded across chunks, one fragment per object.
	m := &writer.Mesh{FaceWidth: 3, FragmentPerObject: true}
	const side = 12
	for j := range side {
		for i := range side {
			m.Positions = append(m.Positions, float32(i)*2.5-15, float32(j)*2.5-15, float32(5*math.Sin(float64(i*j))))
			m.ObjectIDs = append(m.ObjectIDs, int64(j/4))
		}
	}
	for j := range side - 1 {
		for i := range side - 1 {
			v := int64(j*side + i)
			m.Faces = append(m.Faces, v, v+1, v+side, v+1, v+side+1, v+side)
		}
	}
	_, err = writer.WriteMesh(ctx, mem, "sheet", m, writer.Options{ChunkShape: []float64{10, 10, 10}})
	write("sheet", err)
	// Chunks and bins of 0.1 and 0.05 (no float holds them) with points
	// on and a float32 step either side of their borders.
	tenths := &writer.PointCloud{}
	for range 500 {
		for range 3 {
			v := float32(float64(rng.IntN(40)) * 0.05)
			switch rng.IntN(3) {
			case 0:
				v = math.Nextafter32(v, -1)
			case 1:
				v = math.Nextafter32(v, 3)
			}
			tenths.Positions = append(tenths.Positions, v)
		}
	}
	_, err = writer.WritePoints(ctx, mem, "tenths", tenths, writer.Options{ChunkShape: []float64{0.1, 0.1, 0.1}, BinShape: []float64{0.05, 0.05, 0.05}})
	write("tenths", err)
	ch := cache.New(64 << 20)
	var stores []*zvf.Store
	for _, name := range []string{"pts2d", "pts3d", "pts4d", "sparse", "zigzag", "graph", "skel", "sheet", "tenths"} {
		s, err := zvf.Open(ctx, storage.Sub(mem, name), zvf.Options{Name: name, Cache: ch})
		write(name, err)
		stores = append(stores, s)
		// The same store in the 0.9 chunk-grid layout, both ways of
		// storing its links.
		for i, o := range []zvftest.To09Options{{}, {Duplicate: true, Pad: 2}, {OmitNonempty: true, Pad: 1, Codecs: []string{`{"name":"zstd"}`}}} {
			n09 := fmt.Sprintf("%s_v09_%d", name, i)
			dst := memstore.New()
			write(n09, zvftest.To09(ctx, storage.Sub(mem, name), dst, o))
			s, err := zvf.Open(ctx, dst, zvf.Options{Name: n09, Cache: ch})
			write(n09, err)
			stores = append(stores, s)
		}
	}
	runDiff(t, stores)
}

// checkDiffGeoArrow holds the GeoArrow answer of a box to its JSON answer
// (itself held to brute force): objects, coordinates, linestrings.
func checkDiffGeoArrow(t *testing.T, h http.Handler, store string, n int, l *diffLevel, geom string, lo, hi []float64) {
	t.Helper()
	if geom == "mesh" || l.dims < 2 || l.dims > 3 {
		return
	}
	path := fmt.Sprintf("/api/v1/stores/%s/bbox?min=%s&max=%s&level=%d", store, fvec(lo), fvec(hi), n)
	if !l.whole.hasIDs {
		path += "&attributes=*"
	}
	code, _, jb := diffGet(t, h, path+"&f=json")
	if code != 200 {
		t.Fatalf("%s: %d %s", path, code, jb)
	}
	var j rowsJSON
	if err := json.Unmarshal(jb, &j); err != nil {
		t.Fatal(err)
	}
	code, _, gb := diffGet(t, h, path+"&f=geoarrow")
	if code != 200 {
		t.Fatalf("%s geoarrow: %d %s", path, code, gb)
	}
	checkGeoAgainstJSON(t, path+" geoarrow", readGeoArrow(t, gb), &j, geom, -1)
}

// TestDifferentialManyChunks: boxes over thousands of small chunks, whose
// later pages' edges reach rows many chunks back (more chunks than a
// cursor has room to count).
func TestDifferentialManyChunks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := memstore.New()
	rng := rand.New(rand.NewPCG(21, 22))
	g := &writer.Graph{}
	for i := range 3000 {
		g.Positions = append(g.Positions, float32(rng.Float64()*30), float32(rng.Float64()*30), float32(rng.Float64()*30))
		g.ObjectIDs = append(g.ObjectIDs, int64(i%5))
		if i > 0 {
			g.Edges = append(g.Edges, int64(i), int64(rng.IntN(i)))
		}
	}
	if _, err := writer.WriteGraph(ctx, mem, "far", g, writer.Options{ChunkShape: []float64{1.5, 1.5, 1.5}}); err != nil {
		t.Fatal(err)
	}
	pl := &writer.Polylines{Offsets: []int{0}}
	for s := range 20 {
		for k := range 300 {
			a := float64(k) / 10
			pl.Positions = append(pl.Positions, float32(15+14*math.Sin(a+float64(s))), float32(15+14*math.Cos(a*1.3)), float32(k)/10)
		}
		pl.Offsets = append(pl.Offsets, len(pl.Positions)/3)
	}
	if _, err := writer.WritePolylines(ctx, mem, "coils", pl, writer.Options{ChunkShape: []float64{1, 1, 1}}); err != nil {
		t.Fatal(err)
	}
	ch := cache.New(64 << 20)
	var stores []*zvf.Store
	for _, name := range []string{"far", "coils"} {
		s, err := zvf.Open(ctx, storage.Sub(mem, name), zvf.Options{Name: name, Cache: ch})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	h := apitest.New(t, api.Options{Stores: stores}).Handler()
	for _, s := range stores {
		l := loadDiffLevel(t, h, s, 0)
		for _, b := range [][2][]float64{
			{{0, 0, 0}, {30, 30, 30}},
			{{2, 3, 0}, {25, 28, 30}},
			{{0, 0, 4.5}, {30, 30, 21}},
		} {
			checkDiffBox(t, h, s.Name(), 0, l, b[0], b[1], []int{7, 250}, "", nil)
			checkDiffBox(t, h, s.Name(), 0, l, b[0], b[1], []int{250}, "&sample=0.5", func(i int) bool { return l.sampleKeeps(i, 0.5) })
		}
	}
}

// jsonAttrIs reports whether JSON value raw is the attribute value b (as
// stored): a label for a categorical, an array for several channels,
// null for a float that is not finite.
func jsonAttrIs(raw json.RawMessage, a diffAttr, b []byte) bool {
	w := len(b) / a.Channels
	one := func(raw json.RawMessage, b []byte) bool {
		v := diffValue(a.DType, b)
		if a.Categories != nil {
			var s string
			return json.Unmarshal(raw, &s) == nil && int(v) < len(a.Categories) && s == a.Categories[int(v)]
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return string(raw) == "null"
		}
		bits := 64
		if a.DType == "float32" {
			bits = 32
		}
		if strings.HasPrefix(a.DType, "int") || strings.HasPrefix(a.DType, "uint") {
			return string(raw) == strconv.FormatFloat(v, 'f', -1, 64)
		}
		f, err := strconv.ParseFloat(string(raw), bits)
		return err == nil && f == v
	}
	if a.Channels == 1 {
		return one(raw, b)
	}
	var vs []json.RawMessage
	if json.Unmarshal(raw, &vs) != nil || len(vs) != a.Channels {
		return false
	}
	for c, r := range vs {
		if !one(r, b[c*w:(c+1)*w]) {
			return false
		}
	}
	return true
}

// TestConnectivityIsTheInput: the whole level's edges and faces, named by
// their vertices' coordinates, are the ones the store was written from:
// polyline segments from each vertex to the next, a skeleton's [child,
// parent] pairs, a graph's edges, a mesh's faces in winding order (up to
// which corner comes first).
func TestConnectivityIsTheInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := memstore.New()
	rng := rand.New(rand.NewPCG(31, 32))
	pt := func() [3]float32 {
		return [3]float32{float32(rng.Float64()*40 - 20), float32(rng.Float64()*40 - 20), float32(rng.Float64()*40 - 20)}
	}
	key := func(p [3]float32) string { return string(zvftest.Float32LE(p[:])) }
	want := map[string][]string{}
	// Polylines: random walks with steps across chunk borders.
	pl := &writer.Polylines{Offsets: []int{0}}
	for range 30 {
		p := pt()
		for range 5 + rng.IntN(40) {
			q := p
			for k := range q {
				q[k] = max(-20, min(20, p[k]+float32(rng.Float64()*8-4)))
			}
			pl.Positions = append(pl.Positions, p[:]...)
			if len(pl.Positions)/3 > pl.Offsets[len(pl.Offsets)-1]+1 {
				n := len(pl.Positions)
				prev := [3]float32(pl.Positions[n-6 : n-3])
				want["walks"] = append(want["walks"], key(prev)+"|"+key(p))
			}
			p = q
		}
		pl.Offsets = append(pl.Offsets, len(pl.Positions)/3)
	}
	if _, err := writer.WritePolylines(ctx, mem, "walks", pl, writer.Options{ChunkShape: []float64{5, 5, 5}, BinShape: []float64{2.5, 2.5, 2.5}}); err != nil {
		t.Fatal(err)
	}
	// A forest (skeleton) and a graph with cycles.
	for _, skel := range []bool{true, false} {
		g := &writer.Graph{Skeleton: skel}
		var pts [][3]float32
		for i := range 300 {
			p := pt()
			pts = append(pts, p)
			g.Positions = append(g.Positions, p[:]...)
			g.ObjectIDs = append(g.ObjectIDs, int64(i/60))
			if i%60 != 0 {
				g.Edges = append(g.Edges, int64(i), int64(i/60*60+rng.IntN(i%60)))
			}
		}
		name := "tree"
		if !skel {
			name = "cyclic"
			seen := map[[2]int64]bool{}
			for e := 0; e+1 < len(g.Edges); e += 2 {
				seen[[2]int64{g.Edges[e], g.Edges[e+1]}] = true
			}
			for range 80 {
				o := int64(rng.IntN(5) * 60)
				a, b := o+int64(rng.IntN(60)), o+int64(rng.IntN(60))
				if a == b || seen[[2]int64{a, b}] || seen[[2]int64{b, a}] {
					continue
				}
				seen[[2]int64{a, b}] = true
				g.Edges = append(g.Edges, a, b)
			}
		}
		for e := 0; e+1 < len(g.Edges); e += 2 {
			want[name] = append(want[name], key(pts[g.Edges[e]])+"|"+key(pts[g.Edges[e+1]]))
		}
		if _, err := writer.WriteGraph(ctx, mem, name, g, writer.Options{ChunkShape: []float64{8, 8, 8}}); err != nil {
			t.Fatal(err)
		}
	}
	// A mesh: a jittered sheet of triangles and quads' worth of triangles.
	m := &writer.Mesh{FaceWidth: 3, FragmentPerObject: true}
	const side = 15
	var mp [][3]float32
	for j := range side {
		for i := range side {
			p := [3]float32{float32(i)*2.6 - 19 + float32(rng.Float64()), float32(j)*2.6 - 19 + float32(rng.Float64()), float32(rng.Float64() * 10)}
			mp = append(mp, p)
			m.Positions = append(m.Positions, p[:]...)
			m.ObjectIDs = append(m.ObjectIDs, int64(j/5))
		}
	}
	faceKey := func(vs ...[3]float32) string {
		// Rotated so the smallest corner comes first: winding kept.
		ks := make([]string, len(vs))
		for i, v := range vs {
			ks[i] = key(v)
		}
		r := 0
		for i := range ks {
			if ks[i] < ks[r] {
				r = i
			}
		}
		return strings.Join(append(ks[r:], ks[:r]...), "|")
	}
	for j := range side - 1 {
		for i := range side - 1 {
			v := j*side + i
			m.Faces = append(m.Faces, int64(v), int64(v+1), int64(v+side), int64(v+1), int64(v+side+1), int64(v+side))
			want["sheet"] = append(want["sheet"], faceKey(mp[v], mp[v+1], mp[v+side]), faceKey(mp[v+1], mp[v+side+1], mp[v+side]))
		}
	}
	if _, err := writer.WriteMesh(ctx, mem, "sheet", m, writer.Options{ChunkShape: []float64{10, 10, 10}}); err != nil {
		t.Fatal(err)
	}
	ch := cache.New(64 << 20)
	var stores []*zvf.Store
	for _, name := range []string{"walks", "tree", "cyclic", "sheet"} {
		s, err := zvf.Open(ctx, storage.Sub(mem, name), zvf.Options{Name: name, Cache: ch})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	h := apitest.New(t, api.Options{Stores: stores}).Handler()
	for _, s := range stores {
		l := loadDiffLevel(t, h, s, 0)
		var got []string
		for _, e := range l.whole.edges {
			got = append(got, string(l.whole.verts[e[0]])+"|"+string(l.whole.verts[e[1]]))
		}
		for _, f := range l.whole.faces {
			vs := make([][3]float32, len(f))
			for i, v := range f {
				copy(vs[i][:], []float32{float32(l.vals[v][0]), float32(l.vals[v][1]), float32(l.vals[v][2])})
			}
			got = append(got, faceKey(vs...))
		}
		w := slices.Clone(want[s.Name()])
		slices.Sort(got)
		slices.Sort(w)
		if !slices.Equal(got, w) {
			extra, missing := 0, 0
			for _, g := range got {
				if !slices.Contains(w, g) {
					extra++
				}
			}
			for _, g := range w {
				if !slices.Contains(got, g) {
					missing++
				}
			}
			t.Errorf("%s: %d connections, written %d: %d not written, %d written missing", s.Name(), len(got), len(w), extra, missing)
		}
	}
}

// checkDiffManifest holds an object's rows to its manifest route: the
// rows each block's fragments resolve to, read from the chunks, in order.
func checkDiffManifest(t *testing.T, h http.Handler, lvl *zvf.Level, store string, n int, id int64, obj diffAnswer) {
	t.Helper()
	path := fmt.Sprintf("/api/v1/stores/%s/objects/%d/manifest?level=%d", store, id, n)
	code, _, body := diffGet(t, h, path)
	var m struct {
		Blocks []struct {
			Chunk     []int64 `json:"chunk"`
			Fragments []struct {
				Count int     `json:"count"`
				Range []int   `json:"range"`
				Rows  []int64 `json:"rows"`
			} `json:"fragments"`
		} `json:"blocks"`
	}
	if code != 200 || json.Unmarshal(body, &m) != nil {
		t.Fatalf("%s: %d %.200s", path, code, body)
	}
	var want [][]byte
	for _, b := range m.Blocks {
		tile, err := lvl.Chunk(context.Background(), zvf.Key(b.Chunk), nil)
		if err != nil {
			t.Fatalf("%s: chunk %v: %v", path, b.Chunk, err)
		}
		w := len(tile.Vertices.Data) / max(tile.Rows, 1)
		row := func(r int64) []byte { return tile.Vertices.Data[int(r)*w : int(r+1)*w] }
		for _, f := range b.Fragments {
			switch {
			case f.Range != nil:
				if f.Range[1] != f.Count {
					t.Fatalf("%s: range %v of %d rows", path, f.Range, f.Count)
				}
				for r := f.Range[0]; r < f.Range[0]+f.Range[1]; r++ {
					want = append(want, row(int64(r)))
				}
			default:
				if len(f.Rows) != f.Count {
					t.Fatalf("%s: %d rows listed, count %d", path, len(f.Rows), f.Count)
				}
				for _, r := range f.Rows {
					want = append(want, row(r))
				}
			}
		}
	}
	if !slices.EqualFunc(obj.verts, want, bytes.Equal) {
		t.Fatalf("%s: object route %d rows, its manifest's fragments %d (or in another order)", path, len(obj.verts), len(want))
	}
}

// TestPrecisionAtExtremes: quantized answers of stores whose coordinates
// are huge, far from the origin, or spread over a range no 32 bits
// cover, at precisions from far finer than float32 to far coarser than
// the data: every value within P of the stored one, or sent exact.
func TestPrecisionAtExtremes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := memstore.New()
	rng := rand.New(rand.NewPCG(41, 42))
	type spec struct {
		name  string
		chunk float64
		coord func() float32
	}
	for _, sp := range []spec{
		{"far", 100, func() float32 { return float32(1e7 + rng.Float64()*1000) }},
		{"huge", 1e28, func() float32 { return float32((rng.Float64()*2 - 1) * 1e30) }},
		{"tiny", 1e-30, func() float32 { return float32(rng.Float64() * 1e-28) }},
		{"mixed", 1e6, func() float32 {
			if rng.IntN(2) == 0 {
				return float32(rng.Float64() * 1e-3)
			}
			return float32(rng.Float64() * 1e8)
		}},
	} {
		pc := &writer.PointCloud{}
		for range 300 {
			pc.Positions = append(pc.Positions, sp.coord(), sp.coord(), sp.coord())
		}
		if _, err := writer.WritePoints(ctx, mem, sp.name, pc, writer.Options{ChunkShape: []float64{sp.chunk, sp.chunk, sp.chunk}}); err != nil {
			t.Fatalf("%s: %v", sp.name, err)
		}
	}
	ch := cache.New(16 << 20)
	var stores []*zvf.Store
	for _, name := range []string{"far", "huge", "tiny", "mixed"} {
		s, err := zvf.Open(ctx, storage.Sub(mem, name), zvf.Options{Name: name, Cache: ch})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	h := apitest.New(t, api.Options{Stores: stores}).Handler()
	for _, s := range stores {
		l := loadDiffLevel(t, h, s, 0)
		base := fmt.Sprintf("/api/v1/stores/%s/bbox?min=-1e300,-1e300,-1e300&max=1e300,1e300,1e300&f=bin", s.Name())
		for _, p := range []string{"1e-300", "1e-40", "1e-9", "0.001", "0.5", "1", "1000", "1e20", "1e29", "1e35", "1e300"} {
			code, _, body := diffGet(t, h, base+"&precision="+p)
			if code != 200 {
				t.Fatalf("%s precision %s: %d %s", s.Name(), p, code, body)
			}
			pv, _ := strconv.ParseFloat(p, 64)
			got := parseDiffBin(t, body, pv, l.whole.verts)
			if !slices.EqualFunc(got.verts, l.whole.verts, bytes.Equal) {
				t.Fatalf("%s precision %s: rows differ", s.Name(), p)
			}
		}
	}
}

// TestDifferentialJSONPagesByBytes: JSON pages cut by the bytes their
// attribute values take (not by limit) still carry each edge in the page
// of its last vertex and put together are the brute-force answer.
func TestDifferentialJSONPagesByBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := memstore.New()
	rng := rand.New(rand.NewPCG(51, 52))
	pl := &writer.Polylines{Offsets: []int{0}}
	var wide []int64
	for s := range 40 {
		for k := range 50 + rng.IntN(50) {
			pl.Positions = append(pl.Positions, float32(rng.Float64()*40), float32(s), float32(k)*0.4)
			wide = append(wide, int64(k)<<40|int64(s))
		}
		pl.Offsets = append(pl.Offsets, len(pl.Positions)/3)
	}
	// One int64 a row (a multi-channel attribute of a polyline store
	// declares no channels: see TestUndeclaredChannelsAgreeWithTheRows).
	pl.Attributes = []writer.Attribute{writer.Int64Attribute("wide", 1, wide)}
	if _, err := writer.WritePolylines(ctx, mem, "widelines", pl, writer.Options{ChunkShape: []float64{10, 10, 10}}); err != nil {
		t.Fatal(err)
	}
	s, err := zvf.Open(ctx, storage.Sub(mem, "widelines"), zvf.Options{Name: "widelines", Cache: cache.New(64 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	// 1 KiB of ids and values a page: 64 rows of 16 bytes.
	h := apitest.New(t, api.Options{Stores: []*zvf.Store{s}, JSONPageBytes: 1 << 10}).Handler()
	l := loadDiffLevel(t, h, s, 0)
	for _, b := range [][2][]float64{{{0, 0, 0}, {40, 40, 40}}, {{5, 3, 2}, {30, 33, 25}}, {{10, 0, 0}, {20, 40, 40}}} {
		rows, edges, _ := l.expect(b[0], b[1], nil)
		for _, lim := range []string{"", "&limit=1000", "&limit=37"} {
			base := fmt.Sprintf("/api/v1/stores/widelines/bbox?min=%s&max=%s&attributes=*%s", fvec(b[0]), fvec(b[1]), lim)
			pages := fetchPages(t, h, base, "json")
			all := join(t, pages)
			if len(pages) < 2 || int(all.count) != len(rows) {
				t.Fatalf("%s: %d pages, %d rows, want %d", base, len(pages), all.count, len(rows))
			}
			for i, pg := range pages {
				if pg.count > 64 {
					t.Fatalf("%s: page %d holds %d rows, more than 1 KiB of ids and values", base, i, pg.count)
				}
			}
			for i, r := range rows {
				var vs []float64
				if err := json.Unmarshal([]byte(all.cols["vertices"][i]), &vs); err != nil {
					t.Fatal(err)
				}
				for k := range vs {
					if float32(vs[k]) != float32(l.vals[r][k]) {
						t.Fatalf("%s: row %d %v, want %v", base, i, vs, l.vals[r])
					}
				}
			}
			var ge [][2]int64
			for _, e := range all.edges {
				ge = append(ge, [2]int64{e[0], e[1]})
			}
			if !slices.Equal(sortedEdges(ge), sortedEdges(edges)) {
				t.Fatalf("%s: %d edges, brute force %d", base, len(ge), len(edges))
			}
		}
	}
}

// gridCell is the brute force's density cell of a point pos in the box
// [lo, hi] cut into shape cells an axis (axis 0 varying fastest): on each
// axis the last cell whose lower edge is at or below the coordinate.
func gridCell(pos, lo, hi []float64, shape []int) int {
	idx, mul := 0, 1
	for a, v := range pos {
		w := (hi[a] - lo[a]) / float64(shape[a])
		c := 0
		for i := 1; i < shape[a]; i++ {
			if v >= lo[a]+float64(i)*w {
				c = i
			}
		}
		idx += c * mul
		mul *= shape[a]
	}
	return idx
}
