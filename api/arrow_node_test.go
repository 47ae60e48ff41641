package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// The Arrow answers as browsers read them: npm apache-arrow in Node, the
// version .ci/run installs (into the cache outside the checkout). Without
// Node or the package these tests skip, unless ZVFSERVE_REQUIRE_ARROW is
// set (CI sets it): then they fail.

// apacheArrowVersion is the npm apache-arrow the tests run; .ci/run
// installs the same.
const apacheArrowVersion = "21.2.0"

// requireArrow, set, makes a missing Node or package a failure.
const requireArrow = "ZVFSERVE_REQUIRE_ARROW"

// nodeArrow is a folder whose node_modules holds apache-arrow, for
// scripts put there (ES modules find packages by walking up from the
// script), and the node binary.
func nodeArrow(t *testing.T) (dir, node string) {
	t.Helper()
	node = zvftest.Tool(t, requireArrow, "node is not installed", "node")
	mods := os.Getenv("ZVFSERVE_APACHE_ARROW")
	if mods == "" {
		mods = filepath.Join(zvftest.CICache(t), "apache-arrow-"+apacheArrowVersion, "node_modules")
	}
	if _, err := os.Stat(filepath.Join(mods, "apache-arrow", "package.json")); err != nil {
		zvftest.SkipOrFail(t, requireArrow, fmt.Sprintf("npm apache-arrow is not installed in %s (npm install --prefix %s apache-arrow@%s)", mods, filepath.Dir(mods), apacheArrowVersion))
	}
	dir = t.TempDir()
	if err := os.Symlink(mods, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	return dir, node
}

// nodeTable is what testdata/arrow_read.mjs prints for one stream.
type nodeTable struct {
	File    string            `json:"file"`
	Error   string            `json:"error"`
	Rows    int               `json:"rows"`
	Batches int               `json:"batches"`
	Last    map[string]string `json:"last"`
	Fields  []struct {
		Name       string            `json:"name"`
		Type       string            `json:"type"`
		Dictionary bool              `json:"dictionary"`
		Metadata   map[string]string `json:"metadata"`
	} `json:"fields"`
	Columns map[string][]json.RawMessage `json:"columns"`
}

// nodeValue writes a value Node printed as the JSON encoder writes the
// value of Arrow type typ. Called per value, it calls t.Helper (a stack
// walk) only on failure.
func nodeValue(t *testing.T, typ arrow.DataType, raw json.RawMessage) string {
	if string(raw) == "null" {
		return "null"
	}
	switch tt := typ.(type) {
	case *arrow.FixedSizeListType, *arrow.ListType:
		elem := tt.(arrow.ListLikeType).Elem()
		var vs []json.RawMessage
		if err := json.Unmarshal(raw, &vs); err != nil {
			t.Helper()
			t.Fatalf("%s value %s: %v", typ, raw, err)
		}
		parts := make([]string, len(vs))
		for i, v := range vs {
			parts[i] = nodeValue(t, elem, v)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case *arrow.DictionaryType:
		return string(raw) // the label, a JSON string
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		s = string(raw)
	}
	switch typ.ID() {
	case arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Helper()
			t.Fatalf("%s value %s: %v", typ, raw, err)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return "null"
		}
		if typ.ID() == arrow.FLOAT64 {
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
		return strconv.FormatFloat(float64(float32(f)), 'g', -1, 32)
	}
	return s // integers and booleans print as JSON does
}

// runNodeArrow writes each body to a file, reads them all with Node and
// returns what it read, by name.
func runNodeArrow(t *testing.T, bodies map[string][]byte) map[string]nodeTable {
	t.Helper()
	dir, node := nodeArrow(t)
	script, err := os.ReadFile(filepath.Join("testdata", "arrow_read.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "arrow_read.mjs"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{filepath.Join(dir, "arrow_read.mjs")}
	for _, name := range sortedNames(bodies) {
		f := filepath.Join(dir, fmt.Sprintf("%03d.arrows", len(args)))
		if err := os.WriteFile(f, bodies[name], 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, f)
	}
	cmd := exec.Command(node, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("node: %v\n%s", err, errb.String())
	}
	got := map[string]nodeTable{}
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 256<<20)
	names := sortedNames(bodies)
	for i := 0; sc.Scan(); i++ {
		var nt nodeTable
		if err := json.Unmarshal(sc.Bytes(), &nt); err != nil {
			t.Fatalf("node printed %.200q: %v", sc.Bytes(), err)
		}
		if nt.Error != "" {
			t.Fatalf("apache-arrow cannot read %s: %s", names[i], nt.Error)
		}
		got[names[i]] = nt
	}
	if len(got) != len(bodies) {
		t.Fatalf("node read %d of %d streams\n%s", len(got), len(bodies), errb.String())
	}
	return got
}

func sortedNames(m map[string][]byte) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// nodePage is a vertex table as Node read it, as the page the paging
// tests compare (types from the stream's schema as arrow-go reads it).
func nodePage(t *testing.T, nt nodeTable, body []byte) page {
	t.Helper()
	s := readArrow(t, body)
	var p page
	p.numberMatched = -1
	for _, f := range s.schema.Fields() {
		col := map[string]string{"position": "vertices", "object_id": "ids"}[f.Name]
		if col == "" {
			col = "a:" + f.Name
		}
		vals := nt.Columns[f.Name]
		if len(vals) != nt.Rows {
			t.Fatalf("node: column %s has %d values for %d rows", f.Name, len(vals), nt.Rows)
		}
		for _, v := range vals {
			p.addRows(col, nodeValue(t, f.Type, v))
		}
	}
	p.count = int64(nt.Rows)
	p.next = nt.Last["zvf:next"]
	if v, ok := nt.Last["zvf:number_matched"]; ok {
		p.numberMatched, _ = strconv.ParseInt(v, 10, 64)
	}
	if c := nt.Last["zvf:count"]; c != strconv.Itoa(nt.Rows) {
		t.Fatalf("node: zvf:count %q of %d rows", c, nt.Rows)
	}
	return p
}

// nodeGeo is a GeoArrow table as Node read it.
func nodeGeo(t *testing.T, nt nodeTable) *geoAnswer {
	t.Helper()
	if len(nt.Fields) < 1 || nt.Fields[0].Name != "geometry" {
		t.Fatalf("node: fields %v", nt.Fields)
	}
	g := &geoAnswer{ext: nt.Fields[0].Metadata["ARROW:extension:name"]}
	for i, raw := range nt.Columns["geometry"] {
		var parts [][]string
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		coord := func(c any) string {
			xs := c.([]any)
			out := make([]float64, len(xs))
			for k, x := range xs {
				out[k] = x.(float64)
			}
			return coordText(out)
		}
		switch g.ext {
		case "geoarrow.point":
			parts = [][]string{{coord(v)}}
		case "geoarrow.multipoint", "geoarrow.linestring":
			var pts []string
			for _, c := range v.([]any) {
				pts = append(pts, coord(c))
			}
			parts = [][]string{pts}
		case "geoarrow.multilinestring":
			for _, line := range v.([]any) {
				var pts []string
				for _, c := range line.([]any) {
					pts = append(pts, coord(c))
				}
				parts = append(parts, pts)
			}
		default:
			t.Fatalf("node: extension %q", g.ext)
		}
		g.parts = append(g.parts, parts)
		id := int64(-1)
		if ids, ok := nt.Columns["object_id"]; ok && string(ids[i]) != "null" {
			var s string
			if err := json.Unmarshal(ids[i], &s); err != nil {
				t.Fatal(err)
			}
			id, _ = strconv.ParseInt(s, 10, 64)
		}
		g.ids = append(g.ids, id)
	}
	return g
}

// TestArrowReadByApacheArrowJS: apache-arrow, the Arrow browsers run,
// reads every kind of Arrow answer — bbox pages and unpaged answers,
// categorical dictionaries, objects, chunks, edges and faces tables, and
// GeoArrow of every geometry it holds — to the JSON answer's values,
// with the next cursor in the last batch's metadata and the GeoArrow
// extension names on the geometry fields.
func TestArrowReadByApacheArrowJS(t *testing.T) {
	t.Parallel()
	nodeArrow(t) // skip (or fail) first, before building anything
	h := geoServer(t, 1<<40)
	type check func(t *testing.T, nt nodeTable, body []byte)
	bodies := map[string][]byte{}
	checks := map[string]check{}
	add := func(name, path string, c check) {
		_, body := serveOK(t, h, path)
		bodies[name], checks[name] = body, c
	}
	box := "min=-1,-1,-1&max=1001,1001,601"
	vertexTable := func(jsonPath string) check {
		return func(t *testing.T, nt nodeTable, body []byte) {
			_, jb := serveOK(t, h, jsonPath)
			want := parsePage(t, "json", jb)
			if len(want.cols["ids"]) == 0 {
				delete(want.cols, "ids")
			}
			got := nodePage(t, nt, body)
			if got.next != want.next || (want.numberMatched >= 0 && got.numberMatched != want.numberMatched) {
				t.Fatalf("next %q number_matched %d, JSON %q %d", got.next, got.numberMatched, want.next, want.numberMatched)
			}
			want.edges, want.faces, want.width, want.numberMatched = nil, nil, 0, got.numberMatched
			sameJoined(t, "apache-arrow", got, want)
		}
	}
	indexTable := func(jsonPath, member string) check {
		return func(t *testing.T, nt nodeTable, body []byte) {
			_, jb := serveOK(t, h, jsonPath)
			var doc map[string]json.RawMessage
			if err := json.Unmarshal(jb, &doc); err != nil {
				t.Fatal(err)
			}
			var want [][]int64
			if err := json.Unmarshal(doc[member], &want); err != nil || len(want) == 0 {
				t.Fatalf("JSON %s: %v (%d)", member, err, len(want))
			}
			got := make([][]int64, nt.Rows)
			for k, f := range nt.Fields {
				for i, v := range nt.Columns[f.Name] {
					x, err := strconv.ParseInt(string(v), 10, 64)
					if err != nil || f.Name != "v"+strconv.Itoa(k) || f.Type != "Uint32" {
						t.Fatalf("column %s %s value %s", f.Name, f.Type, v)
					}
					got[i] = append(got[i], x)
				}
			}
			if !slices.EqualFunc(got, want, slices.Equal) {
				t.Fatalf("%d %s, JSON %d (or they differ)", len(got), member, len(want))
			}
			var next *string
			_ = json.Unmarshal(doc["next"], &next)
			if next != nil && nt.Last["zvf:next"] != *next {
				t.Fatalf("zvf:next %q, JSON %q", nt.Last["zvf:next"], *next)
			}
		}
	}
	geo := func(jsonPath, geom string, objectID int64) check {
		return func(t *testing.T, nt nodeTable, body []byte) {
			_, jb := serveOK(t, h, jsonPath)
			var j rowsJSON
			if err := json.Unmarshal(jb, &j); err != nil {
				t.Fatal(err)
			}
			g := nodeGeo(t, nt)
			mine := readGeoArrow(t, body)
			g.s = mine.s
			if g.ext != mine.ext {
				t.Fatalf("extension %q, arrow-go reads %q", g.ext, mine.ext)
			}
			checkGeoAgainstJSON(t, "apache-arrow", g, &j, geom, objectID)
			for _, f := range mine.s.schema.Fields()[1:] {
				want := mine.s.column(t, f.Name)
				for i, v := range nt.Columns[f.Name] {
					if got := nodeValue(t, f.Type, v); got != want[i] {
						t.Fatalf("%s row %d: %s, arrow-go %s", f.Name, i, got, want[i])
					}
				}
			}
		}
	}

	// Vertex tables: unpaged with a categorical column, every page of a
	// paged answer, an object, a chunk.
	p := "/api/v1/stores/cells/bbox?" + box + "&attributes=*"
	add("cells bbox", p+"&f=arrow", vertexTable(p+"&f=json"))
	cur := ""
	for i := 0; ; i++ {
		q := p + "&limit=997"
		if cur != "" {
			q += "&cursor=" + url.QueryEscape(cur)
		}
		_, jb := serveOK(t, h, q+"&f=json")
		add(fmt.Sprintf("cells page %02d", i), q+"&f=arrow", vertexTable(q+"&f=json"))
		var j rowsJSON
		if err := json.Unmarshal(jb, &j); err != nil {
			t.Fatal(err)
		}
		if j.Next == nil {
			if i < 2 {
				t.Fatalf("%d pages: too few to test", i+1)
			}
			break
		}
		cur = *j.Next
	}
	add("skeleton object", "/api/v1/stores/skeletons/objects/1?attributes=*&f=arrow", vertexTable("/api/v1/stores/skeletons/objects/1?attributes=*&f=json"))
	add("axons chunk", "/api/v1/stores/axons/levels/0/chunks/1.1.1?attributes=*&f=arrow", vertexTable("/api/v1/stores/axons/levels/0/chunks/1.1.1?attributes=*&f=json"))
	add("points_bins bbox", "/api/v1/stores/points_bins/bbox?min=0,0,0&max=1000,1000,1000&attributes=*&f=arrow",
		vertexTable("/api/v1/stores/points_bins/bbox?min=0,0,0&max=1000,1000,1000&attributes=*&f=json"))
	// Connectivity tables: a paged page of edges, faces, an object's edges.
	p = "/api/v1/stores/axons/bbox?" + box + "&limit=2000"
	_, jb := serveOK(t, h, p+"&f=json")
	var first rowsJSON
	if err := json.Unmarshal(jb, &first); err != nil || first.Next == nil {
		t.Fatalf("axons: %v, no second page", err)
	}
	p2 := p + "&cursor=" + url.QueryEscape(*first.Next)
	add("axons edges page 1", p2+"&f=arrow&table=edges", indexTable(p2+"&f=json", "edges"))
	add("meshes faces", "/api/v1/stores/meshes/bbox?"+box+"&f=arrow&table=faces", indexTable("/api/v1/stores/meshes/bbox?"+box+"&f=json", "faces"))
	add("skeleton object edges", "/api/v1/stores/skeletons/objects/1?f=arrow&table=edges", indexTable("/api/v1/stores/skeletons/objects/1?f=json", "edges"))
	// GeoArrow: every geometry it holds, box and object.
	for _, c := range []struct{ store, geom, q string }{
		{"cells", "point_cloud", ""}, {"axons", "streamline", ""}, {"skeletons", "skeleton", ""}, {"points_bins", "point_cloud", "&attributes=*"},
	} {
		p := "/api/v1/stores/" + c.store + "/bbox?min=190,260,110&max=770,880,480" + c.q
		add(c.store+" geoarrow", p+"&f=geoarrow", geo(p+"&f=json", c.geom, -1))
	}
	add("axons object geoarrow", "/api/v1/stores/axons/objects/2?f=geoarrow", geo("/api/v1/stores/axons/objects/2?f=json", "streamline", 2))

	// A density: one uint32 count per cell, in the JSON answer's order.
	dp := "/api/v1/stores/axons/density?" + box + "&shape=7,5,3"
	add("axons density", dp+"&f=arrow", func(t *testing.T, nt nodeTable, _ []byte) {
		_, jb := serveOK(t, h, dp)
		var want struct{ Counts []uint64 }
		if err := json.Unmarshal(jb, &want); err != nil || len(want.Counts) != 105 {
			t.Fatalf("JSON density: %v (%d cells)", err, len(want.Counts))
		}
		if len(nt.Fields) != 1 || nt.Fields[0].Name != "count" || nt.Fields[0].Type != "Uint32" || nt.Rows != len(want.Counts) {
			t.Fatalf("fields %+v, %d rows", nt.Fields, nt.Rows)
		}
		for i, v := range nt.Columns["count"] {
			if got, err := strconv.ParseUint(string(v), 10, 64); err != nil || got != want.Counts[i] {
				t.Fatalf("cell %d: %s, JSON %d", i, v, want.Counts[i])
			}
		}
	})

	read := runNodeArrow(t, bodies)
	for _, name := range sortedNames(bodies) {
		t.Run(name, func(t *testing.T) { checks[name](t, read[name], bodies[name]) })
	}
}

// jsRecipes are the JavaScript recipes of docs/arrow.md: fenced ```js
// blocks whose first line is "// recipe: NAME".
func jsRecipes(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "arrow.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range regexp.MustCompile("(?s)```js\n// recipe: ([a-z0-9-]+)\n(.*?)```").FindAllSubmatch(doc, -1) {
		out[string(m[1])] = string(m[2])
	}
	return out
}

// recipeRun is what one recipe logged, and the error it threw.
type recipeRun struct {
	Out   string `json:"out"`
	Error string `json:"error"`
}

// runRecipes runs the recipes (name to code) in one Node process through
// testdata/recipes_run.mjs, each its own module in dir, with ZVFSERVE set
// to base: Node with apache-arrow took half a CPU-second to start, once
// a recipe.
func runRecipes(t *testing.T, node, dir, base string, recipes map[string]string) map[string]recipeRun {
	t.Helper()
	runner, err := os.ReadFile(filepath.Join("testdata", "recipes_run.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{filepath.Join(dir, "recipes_run.mjs")}
	if err := os.WriteFile(args[0], runner, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, code := range recipes {
		f := filepath.Join(dir, name+".mjs")
		if err := os.WriteFile(f, []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, f)
	}
	cmd := exec.Command(node, args...)
	cmd.Env = append(os.Environ(), "ZVFSERVE="+base)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s%s", err, out, stderr.Bytes())
	}
	var byFile map[string]recipeRun
	if err := json.Unmarshal(out, &byFile); err != nil {
		t.Fatalf("recipes_run.mjs: %v\n%s%s", err, out, stderr.Bytes())
	}
	ran := map[string]recipeRun{}
	for name := range recipes {
		r, ok := byFile[filepath.Join(dir, name+".mjs")]
		if !ok {
			t.Fatalf("recipe %s did not run: %s%s", name, out, stderr.Bytes())
		}
		ran[name] = r
	}
	return ran
}

// TestArrowRecipes runs every JavaScript recipe of docs/arrow.md in Node
// with apache-arrow against a server with the demo stores, and checks
// what it prints against the JSON answer of the same request.
func TestArrowRecipes(t *testing.T) {
	t.Parallel()
	recipes := jsRecipes(t)
	// What each recipe must print against the demo stores; a recipe
	// without an expectation, or an expectation without a recipe, fails.
	recipeOutputs := map[string]*regexp.Regexp{
		"table":       regexp.MustCompile(`^rows \d+, position \[-?[\d.e+-]+,-?[\d.e+-]+,-?[\d.e+-]+\], cell_type (astrocyte|microglia|neuron|oligodendrocyte)\n$`),
		"pages":       regexp.MustCompile(`^(\d+) pages, (\d+) rows, number matched (\d+)\n$`),
		"deck-points": regexp.MustCompile(`^(\d+) points, positions Float32Array\((\d+)\)\n$`),
		"geoarrow":    regexp.MustCompile(`^(\d+) axons, geoarrow\.multilinestring, (\d+) linestrings\n$`),
	}
	for name := range recipeOutputs {
		if _, ok := recipes[name]; !ok {
			t.Errorf("no recipe %s in docs/arrow.md", name)
		}
	}
	dir, node := nodeArrow(t)
	ts := httptest.NewServer(geoServer(t, 1<<40))
	t.Cleanup(ts.Close)
	count := func(path string) int64 {
		var n int64
		for cur := ""; ; {
			u := path
			if cur != "" {
				u += "&cursor=" + url.QueryEscape(cur)
			}
			resp, b := apitest.Get(t, ts, u)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %d", u, resp.StatusCode)
			}
			var j rowsJSON
			if err := json.Unmarshal(b, &j); err != nil {
				t.Fatal(err)
			}
			n += j.Count
			if j.Next == nil {
				return n
			}
			cur = *j.Next
		}
	}
	ran := runRecipes(t, node, dir, ts.URL, recipes)
	for name := range recipes {
		t.Run(name, func(t *testing.T) {
			want, ok := recipeOutputs[name]
			if !ok {
				t.Fatalf("recipe %s has no expected output", name)
			}
			r := ran[name]
			if r.Error != "" {
				t.Fatalf("%s\n%s", r.Error, r.Out)
			}
			out := r.Out
			m := want.FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("printed %q, want %s", out, want)
			}
			switch name {
			case "pages":
				total := count("/api/v1/stores/cells/bbox?min=0,0,0&max=1000,1000,600&f=json&limit=1000")
				if m[2] != strconv.FormatInt(total, 10) || m[3] != m[2] || m[1] == "1" {
					t.Fatalf("%s: JSON has %d rows", out, total)
				}
			case "table":
				total := count("/api/v1/stores/cells/bbox?min=0,0,0&max=500,500,300&f=json")
				if !strings.HasPrefix(out, "rows "+strconv.FormatInt(total, 10)+",") {
					t.Fatalf("%s: JSON has %d rows", out, total)
				}
			case "geoarrow":
				resp, b := apitest.Get(t, ts, "/api/v1/stores/axons/bbox?min=190,260,110&max=770,880,480&f=json&connectivity=false")
				var j rowsJSON
				if err := json.Unmarshal(b, &j); err != nil || resp.StatusCode != http.StatusOK {
					t.Fatal(err)
				}
				ids := map[int64]bool{}
				for _, id := range j.ObjectIDs {
					ids[id] = true
				}
				if m[1] != strconv.Itoa(len(ids)) || len(ids) < 2 {
					t.Fatalf("%s: the JSON answer has %d axons", out, len(ids))
				}
			case "deck-points":
				total := count("/api/v1/stores/cells/bbox?min=0,0,0&max=500,500,300&f=json")
				if m[1] != strconv.FormatInt(total, 10) || m[2] != strconv.FormatInt(3*total, 10) {
					t.Fatalf("%s: JSON has %d rows", out, total)
				}
			}
		})
	}
}
