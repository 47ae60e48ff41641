package api_test

import (
	"encoding/json"
	"math"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// docCurlURL finds the URL of a curl command in a shell block of the docs.
// The path ends at its closing quote, or at white space when unquoted.
var docCurlURL = regexp.MustCompile(`curl[^'"\n]*?(?:'(?:http://)?localhost:8080(/[^']*)'|"(?:http://)?localhost:8080(/[^"]*)"|\s(?:http://)?localhost:8080(/[^\s` + "`" + `]*))`)

// TestDocCurlExamplesAnswer: README.md and docs/*.md show curl commands
// to run against `go run ./cmd/zvfserve`, the demo. Each must answer
// 200 from the demo stores, as a reader who pastes it expects.
func TestDocCurlExamplesAnswer(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("..", "README.md"))
	h := demoServer(t, api.Options{}).Handler()
	n := 0
	for _, f := range files {
		if filepath.Base(f) == "performance-log.md" {
			continue // the notebook: its commands need the benchmark stores
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range docCurlURL.FindAllStringSubmatch(string(b), -1) {
			n++
			code, _, body := serve(t, h, m[1]+m[2]+m[3])
			if code != 200 {
				t.Errorf("%s: %s: %d %.300s", filepath.Base(f), m[0], code, body)
			}
		}
	}
	if n < 10 {
		t.Fatalf("found %d curl examples; the pattern no longer matches the docs", n)
	}
}

// TestFilterDocErrorsAreTheServers: the messages docs/filters.md shows
// under Errors are what the server answers. It showed `filter: unknown
// property "volum"` where the server names the level and its queryables.
func TestFilterDocErrorsAreTheServers(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "filters.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, errs, ok := strings.Cut(string(doc), "\n## Errors\n")
	if !ok {
		t.Fatal("docs/filters.md has no Errors section")
	}
	h := demoServer(t, api.Options{}).Handler()
	for _, tc := range []struct{ filter, lang string }{
		{"volum = 1", ""},
		{"group < 3", ""},
		{`{"op": "between", "args": [{"property": "intensity"}, 1]}`, "cql2-json"},
	} {
		q := url.Values{"min": {"0,0,0"}, "max": {"1000,1000,600"}, "filter": {tc.filter}}
		if tc.lang != "" {
			q.Set("filter-lang", tc.lang)
		}
		code, _, body := serve(t, h, "/api/v1/stores/cells/count?"+q.Encode())
		p := problemOf(t, code, body)
		if code != 400 || !strings.Contains(errs, "\n"+p.Detail+"\n") {
			t.Errorf("%s: %d %q is not among docs/filters.md's errors", tc.filter, code, p.Detail)
		}
	}
}

// TestBinaryFormatRecipe runs the JavaScript reader of
// docs/binary-format.md in Node against a server with the demo stores:
// plain and quantized (precision=), it must walk every block to the end of
// the answer and find the JSON answer's vertices, exactly or within the
// precision asked.
func TestBinaryFormatRecipe(t *testing.T) {
	t.Parallel()
	node := zvftest.Tool(t, requireArrow, "node is not installed", "node")
	doc, err := os.ReadFile(filepath.Join("..", "docs", "binary-format.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```js\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/binary-format.md has no JavaScript reader")
	}
	code := string(m[1])
	// What the recipe leaves to the reader (its two comments) becomes
	// rows the test can compare.
	for old, new := range map[string]string{
		"/* upload to the GPU */": "for (let i = 0; i < xyz.length; i += 3) rows.push([...xyz.subarray(i, i + 3)]);",
		"/* x of row i: offset[0] + axes[0][i] * scale[0]; or upload axes and dequantize in the shader */": "for (let i = 0; i < R; i++) rows.push(axes.map((q, a) => offset[a] + q[i] * scale[a]));",
	} {
		if !strings.Contains(code, old) {
			t.Fatalf("the recipe no longer has %q", old)
		}
		code = strings.ReplaceAll(code, old, new)
	}
	script := filepath.Join(t.TempDir(), "recipe.mjs")
	prog := "const url = process.argv[2]; const rows = [];\n" + code +
		"\nconsole.log(JSON.stringify({kind: header.kind, end: p, length: buf.byteLength, rows}));\n"
	if err := os.WriteFile(script, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(demoServer(t, api.Options{}).Handler())
	t.Cleanup(ts.Close)
	const box = "/api/v1/stores/axons/bbox?min=0,0,0&max=300,300,300"
	_, _, body := serve(t, ts.Config.Handler, box)
	var want answer
	if err := json.Unmarshal(body, &want); err != nil || len(want.Vertices) == 0 {
		t.Fatalf("JSON answer: %v %.200s", err, body)
	}
	for _, tc := range []struct {
		query string
		tol   float64
	}{{"", 0}, {"&precision=0.25", 0.25}} {
		// The recipe appends &f=bin itself.
		out, err := exec.Command(node, script, ts.URL+box+tc.query).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: node: %v\n%s", tc.query, err, out)
		}
		var got struct {
			Kind        string
			End, Length int
			Rows        [][]float64
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %v: %s", tc.query, err, out)
		}
		if got.Kind != "bbox" || got.End != got.Length || len(got.Rows) != len(want.Vertices) {
			t.Fatalf("%s: kind %q, walked to %d of %d bytes, %d rows of %d", tc.query, got.Kind, got.End, got.Length, len(got.Rows), len(want.Vertices))
		}
		for i, r := range got.Rows {
			for a := range r {
				exact := float64(float32(want.Vertices[i][a])) // JSON prints the float32's shortest decimal
				if (tc.tol == 0 && r[a] != exact) || math.Abs(r[a]-exact) > tc.tol {
					t.Fatalf("%s: row %d axis %d: %v, want %v", tc.query, i, a, r[a], want.Vertices[i][a])
				}
			}
		}
	}
}

// TestNgNotFoundListsTheSources: openapi.yaml's NgNotFound says what a
// mesh store's 404 lists; it left out the density volume every store of
// three axes has (and, later, the segments source naming its meshes).
func TestNgNotFoundListsTheSources(t *testing.T) {
	t.Parallel()
	h := demoServer(t, api.Options{}).Handler()
	code, _, body := serve(t, h, "/ng/meshes/annotations/info")
	p := problemOf(t, code, body)
	const want = "/ng/meshes/meshes, /ng/meshes/multilod, /ng/meshes/segments, /ng/meshes/density"
	if code != 404 || !strings.HasSuffix(p.Detail, want) {
		t.Fatalf("%d %q, want the sources %s", code, p.Detail, want)
	}
	spec, err := os.ReadFile(filepath.Join("..", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(spec), "`/ng/STORE/meshes`, `/ng/STORE/multilod`, `/ng/STORE/segments` and `/ng/STORE/density`") {
		t.Error("openapi.yaml's NgNotFound no longer names the mesh store's sources as the server lists them")
	}
}
