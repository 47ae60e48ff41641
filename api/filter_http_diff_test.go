package api_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// httpRow is one row of an unfiltered JSON answer with every attribute,
// as the oracle reads it.
type httpRow struct {
	pos   [3]float64
	vert  string            // the vertex as the answer spells it
	attrs map[string]string // each attribute's value as the answer spells it
}

// httpAnswer is a JSON bbox answer's rows, all pages (following next).
func httpAnswer(t *testing.T, h http.Handler, path string) []httpRow {
	t.Helper()
	var rows []httpRow
	base := path
	for page := 0; path != ""; page++ {
		code, _, body := serve(t, h, path)
		if code != 200 {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		var a struct {
			Vertices   []json.RawMessage            `json:"vertices"`
			Attributes map[string][]json.RawMessage `json:"attributes"`
			Next       *string                      `json:"next"`
		}
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for i, v := range a.Vertices {
			var p []float64
			if err := json.Unmarshal(v, &p); err != nil || len(p) != 3 {
				t.Fatalf("vertex %s: %v", v, err)
			}
			r := httpRow{vert: string(v), attrs: map[string]string{}}
			copy(r.pos[:], p)
			for name, col := range a.Attributes {
				r.attrs[name] = string(col[i])
			}
			rows = append(rows, r)
		}
		path = ""
		if a.Next != nil {
			path = base + "&cursor=" + url.QueryEscape(*a.Next)
		}
		if page > 1000 {
			t.Fatal("paging does not end")
		}
	}
	return rows
}

// TestFilterHTTPMatchesBruteForce: over HTTP, on a store of edge values
// (float32 NaN, ±Inf, −0, extremes and subnormals; int64 and uint64 past
// 2⁵³; labels with quotes, backslashes, % and non-ASCII), each filter in
// both encodings gives the unfiltered JSON answer's rows it is true for
// (evaluated here on the answer's own values), in order, on one page and
// paged, cold and warm; count is their number, density their cells.
func TestFilterHTTPMatchesBruteForce(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 9))
	const n = 600
	pos := make([]float32, 3*n)
	for i := range pos {
		pos[i] = float32(r.Float64() * 16)
		if r.IntN(8) == 0 {
			pos[i] = float32(r.IntN(9)) * 2 // on chunk, bin and cell boundaries
		}
	}
	f32s := []float32{0.1, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)), 0,
		math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, 16777217, 1.5, 2.5, -1}
	i64s := []int64{1<<53 + 1, 1 << 53, -(1 << 62) - 3, math.MaxInt64, math.MinInt64, 0, -1, 720575940621039145, 7}
	u64s := []uint64{math.MaxUint64, 1 << 63, 1<<64 - 3, 0, 1, 1<<53 + 1, 1 << 53, 5}
	labels := []string{"it's", "Ünïcode", `"q"`, `a\b`, "100%", "", "x y", "a_b"}
	fb, ib, ub := make([]byte, 4*n), make([]byte, 8*n), make([]byte, 8*n)
	cats := make([]string, n)
	for i := range n {
		binary.LittleEndian.PutUint32(fb[4*i:], math.Float32bits(f32s[r.IntN(len(f32s))]))
		binary.LittleEndian.PutUint64(ib[8*i:], uint64(i64s[r.IntN(len(i64s))]))
		binary.LittleEndian.PutUint64(ub[8*i:], u64s[r.IntN(len(u64s))])
		cats[i] = labels[r.IntN(len(labels))]
	}
	p := &writer.PointCloud{Positions: pos, Attributes: []writer.Attribute{
		{Name: "f32", DType: "float32", Channels: 1, Data: fb},
		{Name: "i64", DType: "int64", Channels: 1, Data: ib},
		{Name: "u64", DType: "uint64", Channels: 1, Data: ub},
		writer.CategoricalAttribute("cat", cats),
	}}
	h := writtenStore(t, "p", func(ctx context.Context, w storage.Writer, prefix string) error {
		_, err := writer.WritePoints(ctx, w, prefix, p, writer.Options{ChunkShape: []float64{4, 4, 4}, BinShape: []float64{2, 2, 2}})
		return err
	})
	// The oracle's values, from the answer's text.
	num := func(s string) (float64, bool) { // a float32 value; false for null
		if s == "null" {
			return 0, false
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("value %s: %v", s, err)
		}
		return f, true
	}
	i64 := func(s string) int64 {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("int64 %s: %v", s, err)
		}
		return v
	}
	u64 := func(s string) uint64 {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("uint64 %s: %v", s, err)
		}
		return v
	}
	label := func(s string) string {
		var v string
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatalf("label %s: %v", s, err)
		}
		return v
	}
	f32 := func(r httpRow) (float64, bool) { return num(r.attrs["f32"]) }
	type fcase struct {
		text, json string
		keep       func(r httpRow) bool
	}
	cases := []fcase{
		{"f32 > 0", `{"op":">","args":[{"property":"f32"},0]}`, func(r httpRow) bool { v, ok := f32(r); return ok && v > 0 }},
		{"NOT f32 > 0", `{"op":"not","args":[{"op":">","args":[{"property":"f32"},0]}]}`, func(r httpRow) bool { v, ok := f32(r); return ok && !(v > 0) }},
		{"f32 = 0", `{"op":"=","args":[{"property":"f32"},0]}`, func(r httpRow) bool { v, ok := f32(r); return ok && v == 0 }},
		{"f32 IS NULL OR f32 < -0.5", `{"op":"or","args":[{"op":"isNull","args":[{"property":"f32"}]},{"op":"<","args":[{"property":"f32"},-0.5]}]}`,
			func(r httpRow) bool { v, ok := f32(r); return !ok || v < -0.5 }},
		{"f32 BETWEEN 1.5 AND 16777217", `{"op":"between","args":[{"property":"f32"},1.5,16777217]}`, func(r httpRow) bool { v, ok := f32(r); return ok && v >= 1.5 && v <= 16777217 }},
		{"f32 >= 3.4028234663852886e38", `{"op":">=","args":[{"property":"f32"},3.4028234663852886e38]}`, func(r httpRow) bool { v, ok := f32(r); return ok && v >= math.MaxFloat32 }},
		{"i64 = 9007199254740993", `{"op":"=","args":[{"property":"i64"},9007199254740993]}`, func(r httpRow) bool { return i64(r.attrs["i64"]) == 1<<53+1 }},
		{"i64 > 9007199254740992", `{"op":">","args":[{"property":"i64"},9007199254740992]}`, func(r httpRow) bool { return i64(r.attrs["i64"]) > 1<<53 }},
		{"i64 IN (-9223372036854775808, 720575940621039145, 7)", `{"op":"in","args":[{"property":"i64"},[-9223372036854775808,720575940621039145,7]]}`,
			func(r httpRow) bool {
				return slices.Contains([]int64{math.MinInt64, 720575940621039145, 7}, i64(r.attrs["i64"]))
			}},
		{"i64 < -0.5", `{"op":"<","args":[{"property":"i64"},-0.5]}`, func(r httpRow) bool { return i64(r.attrs["i64"]) < 0 }},
		{"u64 >= 18446744073709551613", `{"op":">=","args":[{"property":"u64"},18446744073709551613]}`, func(r httpRow) bool { return u64(r.attrs["u64"]) >= 1<<64-3 }},
		{"u64 NOT BETWEEN 1 AND 9223372036854775808", `{"op":"not","args":[{"op":"between","args":[{"property":"u64"},1,9223372036854775808]}]}`,
			func(r httpRow) bool { v := u64(r.attrs["u64"]); return v < 1 || v > 1<<63 }},
		{"u64 = 9007199254740993", `{"op":"=","args":[{"property":"u64"},9007199254740993]}`, func(r httpRow) bool { return u64(r.attrs["u64"]) == 1<<53+1 }},
		{"cat = 'it''s' OR cat LIKE '%\\\\%'", `{"op":"or","args":[{"op":"=","args":[{"property":"cat"},"it's"]},{"op":"like","args":[{"property":"cat"},"%\\\\%"]}]}`,
			func(r httpRow) bool { c := label(r.attrs["cat"]); return c == "it's" || strings.Contains(c, `\`) }},
		{"cat LIKE '_nïc%' OR cat = '\"q\"'", `{"op":"or","args":[{"op":"like","args":[{"property":"cat"},"_nïc%"]},{"op":"=","args":[{"property":"cat"},"\"q\""]}]}`,
			func(r httpRow) bool { c := label(r.attrs["cat"]); return c == "Ünïcode" || c == `"q"` }},
		{"cat > 'a' AND NOT (cat IN ('x y', '100%') OR u64 = 5)", `{"op":"and","args":[{"op":">","args":[{"property":"cat"},"a"]},{"op":"not","args":[{"op":"or","args":[{"op":"in","args":[{"property":"cat"},["x y","100%"]]},{"op":"=","args":[{"property":"u64"},5]}]}]}]}`,
			func(r httpRow) bool {
				c := label(r.attrs["cat"])
				return c > "a" && !(c == "x y" || c == "100%" || u64(r.attrs["u64"]) == 5)
			}},
		{"cat LIKE '100\\%' AND cat <> ''", `{"op":"and","args":[{"op":"like","args":[{"property":"cat"},"100\\%"]},{"op":"<>","args":[{"property":"cat"},""]}]}`,
			func(r httpRow) bool { return label(r.attrs["cat"]) == "100%" }},
	}
	type box struct{ min, max [3]float64 }
	boxes := []box{{[3]float64{0, 0, 0}, [3]float64{16, 16, 16}}, {[3]float64{1, 3, 2}, [3]float64{13, 9.5, 16}}, {[3]float64{4, 4, 4}, [3]float64{8, 8, 8}}, {[3]float64{5, 5, 5}, [3]float64{5.5, 7, 5.5}}}
	vec := func(v [3]float64) string {
		return strconv.FormatFloat(v[0], 'g', -1, 64) + "," + strconv.FormatFloat(v[1], 'g', -1, 64) + "," + strconv.FormatFloat(v[2], 'g', -1, 64)
	}
	shape := [3]int{5, 3, 2}
	for _, b := range boxes {
		q := "min=" + vec(b.min) + "&max=" + vec(b.max)
		all := httpAnswer(t, h, "/api/v1/stores/p/bbox?"+q+"&attributes=*")
		allLines := map[string][]string{}
		for _, f := range []string{"ndjson", "csv"} {
			allLines[f] = rowLines(t, h, "/api/v1/stores/p/bbox?"+q+"&attributes=*&f="+f, f)
			if len(allLines[f]) != len(all) {
				t.Fatalf("box %v: %d %s rows, %d JSON rows", b, len(allLines[f]), f, len(all))
			}
		}
		for _, c := range cases {
			var want []httpRow
			wantLines := map[string][]string{}
			for i, r := range all {
				if c.keep(r) {
					want = append(want, r)
					for f, lines := range allLines {
						wantLines[f] = append(wantLines[f], lines[i])
					}
				}
			}
			for _, enc := range []struct{ lang, src string }{{"cql2-text", c.text}, {"cql2-json", c.json}} {
				fq := q + "&filter-lang=" + enc.lang + "&filter=" + url.QueryEscape(enc.src)
				what := fmt.Sprintf("box %v %s %s", b, enc.lang, enc.src)
				for _, page := range []string{"", "", "&limit=7"} { // cold, warm, paged
					got := httpAnswer(t, h, "/api/v1/stores/p/bbox?"+fq+"&attributes=*"+page)
					if len(got) != len(want) {
						t.Fatalf("%s%s: %d rows, brute force %d", what, page, len(got), len(want))
					}
					for i := range got {
						if got[i].vert != want[i].vert || fmt.Sprint(got[i].attrs) != fmt.Sprint(want[i].attrs) {
							t.Fatalf("%s%s: row %d is %s %v, brute force %s %v", what, page, i, got[i].vert, got[i].attrs, want[i].vert, want[i].attrs)
						}
					}
				}
				// The filter reads what it names, whatever attributes asks for.
				for _, attrs := range []string{"cat", "u64,f32", ""} {
					got := httpAnswer(t, h, "/api/v1/stores/p/bbox?"+fq+"&attributes="+attrs)
					if len(got) != len(want) {
						t.Fatalf("%s attributes=%s: %d rows, brute force %d", what, attrs, len(got), len(want))
					}
					for i := range got {
						for name, v := range got[i].attrs {
							if v != want[i].attrs[name] || got[i].vert != want[i].vert {
								t.Fatalf("%s attributes=%s: row %d %s %s=%s, brute force %s %s", what, attrs, i, got[i].vert, name, v, want[i].vert, want[i].attrs[name])
							}
						}
					}
				}
				for f, wl := range wantLines {
					if got := rowLines(t, h, "/api/v1/stores/p/bbox?"+fq+"&attributes=*&f="+f, f); !slices.Equal(got, wl) {
						t.Fatalf("%s: %s rows %q, brute force %q", what, f, got, wl)
					}
				}
				code, _, body := serve(t, h, "/api/v1/stores/p/count?"+fq)
				var cnt struct{ Count int }
				if code != 200 || json.Unmarshal(body, &cnt) != nil || cnt.Count != len(want) {
					t.Fatalf("%s: count %d %s, brute force %d", what, code, body, len(want))
				}
				code, _, body = serve(t, h, fmt.Sprintf("/api/v1/stores/p/density?%s&shape=%d,%d,%d", fq, shape[0], shape[1], shape[2]))
				var d struct{ Counts []int }
				if code != 200 || json.Unmarshal(body, &d) != nil {
					t.Fatalf("%s: density %d %s", what, code, body)
				}
				wd := make([]int, shape[0]*shape[1]*shape[2])
				for _, r := range want {
					wd[gridCell(r.pos[:], b.min[:], b.max[:], shape[:])]++
				}
				if !slices.Equal(d.Counts, wd) {
					t.Fatalf("%s: density %v, brute force %v", what, d.Counts, wd)
				}
			}
		}
	}
}

// rowLines is the row lines of an NDJSON or CSV answer (one page).
func rowLines(t *testing.T, h http.Handler, path, format string) []string {
	t.Helper()
	code, _, body := serve(t, h, path)
	if code != 200 {
		t.Fatalf("%s: %d %s", path, code, body)
	}
	var out []string
	for i, line := range strings.Split(strings.TrimRight(string(body), "\n"), "\n") {
		switch {
		case format == "csv" && i > 0:
			out = append(out, line)
		case format == "ndjson" && strings.HasPrefix(line, `{"v":`):
			out = append(out, line)
		}
	}
	return out
}

// TestFloat32AnswerSpellingAsLiteral holds docs/filters.md's Numbers:
// the JSON answer prints a float32 attribute by its shortest float32
// decimal; as a filter literal that decimal is read as float64, so it
// finds the row only when it is exact (1.5), not for 0.1, whose float64
// spelling does.
func TestFloat32AnswerSpellingAsLiteral(t *testing.T) {
	t.Parallel()
	fb := make([]byte, 8)
	binary.LittleEndian.PutUint32(fb, math.Float32bits(0.1))
	binary.LittleEndian.PutUint32(fb[4:], math.Float32bits(1.5))
	p := &writer.PointCloud{Positions: []float32{1, 1, 1, 2, 2, 2}, Attributes: []writer.Attribute{{Name: "volume", DType: "float32", Channels: 1, Data: fb}}}
	h := writtenStore(t, "p", func(ctx context.Context, w storage.Writer, prefix string) error {
		_, err := writer.WritePoints(ctx, w, prefix, p, writer.Options{ChunkShape: []float64{4, 4, 4}})
		return err
	})
	const box = "min=0,0,0&max=3,3,3"
	if _, _, body := serve(t, h, "/api/v1/stores/p/bbox?"+box+"&attributes=volume"); !strings.Contains(string(body), `"volume":[0.1,1.5]`) {
		t.Fatalf("answer %s: want volume printed as [0.1,1.5]", body)
	}
	for f, want := range map[string]int{"volume = 0.1": 0, "volume = 0.10000000149011612": 1, "volume = 1.5": 1, "volume IN (0.1, 1.5)": 1, "volume BETWEEN 0.0999 AND 0.1001": 1} {
		code, _, body := serve(t, h, "/api/v1/stores/p/count?"+box+"&filter="+url.QueryEscape(f))
		var c struct{ Count int }
		if code != 200 || json.Unmarshal(body, &c) != nil || c.Count != want {
			t.Errorf("%s: %d %s, want count %d", f, code, body, want)
		}
	}
}
