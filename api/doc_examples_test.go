package api_test

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
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
		if filepath.Base(f) == "performance.md" {
			continue // its commands need the benchmark stores
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
