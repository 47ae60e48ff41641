package zvfserve_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// notebook is the lab notebook of dated performance runs. It cites tests,
// files and paths as they were on the day of each run, some since renamed
// or removed, so only its links are held to the tree. Its summary,
// docs/performance.md, is user documentation like the rest.
var notebook = filepath.Join("docs", "performance-log.md")

// docFiles are the user documentation the tests below hold to the tree:
// README.md and docs/*.md but the notebook.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, f := range files {
		if f != notebook {
			out = append(out, f)
		}
	}
	return out
}

// TestDocsNameRealTests: every test, fuzz target or benchmark the docs
// cite as proof of a statement (`TestX`, `TestX/sub`) is a function of a
// _test.go file, and every _test.go file they name exists. formats.md
// cited TestReference09Stores, folded into TestReferenceStores, and
// neuroglancer.md an independent_test.go that had become shardingtest.
func TestDocsNameRealTests(t *testing.T) {
	t.Parallel()
	dirs, files := testFuncs(t)
	cited := regexp.MustCompile(`\b((?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*)\b`)
	file := regexp.MustCompile("`([a-z0-9_]+_test\\.go)`")
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range cited.FindAllSubmatch(b, -1) {
			if len(dirs[string(m[1])]) == 0 {
				t.Errorf("%s cites %s, which no _test.go file declares", f, m[1])
			}
		}
		for _, m := range file.FindAllSubmatch(b, -1) {
			if !files[string(m[1])] {
				t.Errorf("%s names %s, which does not exist", f, m[1])
			}
		}
	}
}

// TestDocsLinksResolve: every relative link of the docs, the notebook's
// included, names a file of the tree, and every #anchor a heading (or an
// <a id>) of its page, as GitHub renders them. The summary links each
// figure to the notebook's dated section it was copied from.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	fence := regexp.MustCompile("(?s)```.*?```")
	for _, f := range append(docFiles(t), notebook) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := fence.ReplaceAllString(string(b), "")
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			u := m[1]
			if regexp.MustCompile(`^[a-z]+:`).MatchString(u) {
				continue
			}
			p, frag, _ := strings.Cut(u, "#")
			target := f
			if p != "" {
				target = filepath.Join(filepath.Dir(f), p)
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s links to %s, which does not exist", f, u)
				continue
			}
			if frag != "" && strings.HasSuffix(target, ".md") && !anchors(t, target)[frag] {
				t.Errorf("%s links to %s: %s has no such heading", f, u, target)
			}
		}
	}
}

// anchors are the fragment ids GitHub gives the headings of a markdown
// file (lower case, punctuation but - and _ dropped, spaces to -, a
// repeated one suffixed -1, -2, …), and the ids of its <a id> tags.
func anchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out, seen := map[string]bool{}, map[string]int{}
	drop := regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
	tag := regexp.MustCompile(`<a (?:name|id)="([^"]+)"`)
	inFence := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if inFence {
			continue
		}
		if h := strings.TrimLeft(line, "#"); h != line && strings.HasPrefix(h, " ") {
			id := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(h)), ""), " ", "-")
			if n, ok := seen[id]; ok {
				seen[id] = n + 1
				id += "-" + strconv.Itoa(n+1)
			} else {
				seen[id] = 0
			}
			out[id] = true
		}
		for _, m := range tag.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
	}
	return out
}

// TestDocsNameRealPaths: every path of the tree the docs name in code
// spans (`zvf/storage/localfs`, `.ci/run`, `testdata/zvf-0.9/FORMAT.md`)
// exists.
func TestDocsNameRealPaths(t *testing.T) {
	t.Parallel()
	path := regexp.MustCompile("`((?:\\.ci|api|cache|cmd|docs|fragindex|testdata|vlen|web|zvf)/[A-Za-z0-9_./-]*[A-Za-z0-9_])`")
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range path.FindAllSubmatch(b, -1) {
			p := string(m[1])
			if strings.ContainsAny(p, "{}*") {
				continue
			}
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s names %s, which does not exist", f, p)
			}
		}
	}
}

// TestOperationsTestsRunWhereItSays: docs/operations.md tells a reader to
// run its tests as `go test ./api/ -run NAME`, or in the package named
// before them (`zvf` `TestX`, `TestY`: both in zvf, until a ';', '(', ')'
// or '|'). Several zvf tests were cited bare, so the command it gave ran
// nothing.
func TestOperationsTestsRunWhereItSays(t *testing.T) {
	t.Parallel()
	dirs, _ := testFuncs(t)
	doc, err := os.ReadFile(filepath.Join("docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	pkg := "api"
	for _, m := range regexp.MustCompile("`([^`]+)`|[;()|]").FindAllStringSubmatch(string(doc), -1) {
		span := m[1]
		switch {
		case span == "":
			pkg = "api"
		case strings.HasPrefix(span, "Test"):
			name, _, _ := strings.Cut(span, "/")
			in := dirs[name]
			ok := false
			for _, d := range in {
				ok = ok || d == pkg || strings.HasSuffix(d, "/"+pkg)
			}
			if !ok {
				t.Errorf("docs/operations.md: %s is read as a test of %s, but it is in %v", name, pkg, in)
			}
		default:
			for _, ds := range dirs {
				for _, d := range ds {
					if d == span || strings.HasSuffix(d, "/"+span) {
						pkg = span
					}
				}
			}
		}
	}
}

// testFuncs walks the tree's _test.go files: the folders declaring each
// test, fuzz target, benchmark or example, and the files' names.
func testFuncs(t *testing.T) (dirs map[string][]string, files map[string]bool) {
	t.Helper()
	dirs, files = map[string][]string{}, map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark|Example)\w*)\(`)
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		files[d.Name()] = true
		b, err := os.ReadFile(p)
		for _, m := range decl.FindAllSubmatch(b, -1) {
			dirs[string(m[1])] = append(dirs[string(m[1])], filepath.ToSlash(filepath.Dir(p)))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs, files
}
