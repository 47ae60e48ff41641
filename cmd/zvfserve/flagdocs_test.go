package main

import (
	"flag"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestServeFlagDefaultsMatchTheDocs: an operator reads a flag's variable
// and default in README's table, in docs/operations.md's and in the
// prose of docs/deploy.md ("--x (default …)"); each must be what serve
// --help says and serve does. TestServeFlagsDocumented checks README's
// rows and variables; this checks every table's variables and defaults,
// and deploy.md's defaults.
func TestServeFlagDefaultsMatchTheDocs(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	serveFlags(fs, &serveConfig{})
	for _, doc := range []string{"../../README.md", "../../docs/operations.md", "../../docs/deploy.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rows := 0
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "| `--") {
				continue
			}
			cells := strings.Split(line, "|")
			if len(cells) < 5 {
				continue
			}
			names, envs, defs := splitCell(cells[1]), splitCell(cells[2]), splitCell(cells[3])
			for i, name := range names {
				f := fs.Lookup(strings.TrimPrefix(name, "--"))
				if f == nil {
					t.Errorf("%s: a row for %s, which serve does not take", doc, name)
					continue
				}
				rows++
				if env := "ZVFSERVE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_")); at(envs, i) != env {
					t.Errorf("%s: %s's variable is %q, serve reads %s", doc, name, at(envs, i), env)
				}
				if d := at(defs, i); !sameDefault(d, f) {
					t.Errorf("%s: %s's default is %q, serve --help says %q", doc, name, d, f.DefValue)
				}
			}
		}
		// Prose: "`--shutdown-grace` (default 15 s)", "(`--max-age`, default 1 h)".
		for _, m := range regexp.MustCompile("`(--[a-z-]+)`(?: \\(|, )default ([^;)]+)").FindAllStringSubmatch(string(b), -1) {
			rows++
			switch f := fs.Lookup(strings.TrimPrefix(m[1], "--")); {
			case f == nil:
				t.Errorf("%s: %s (default %s), which serve does not take", doc, m[1], m[2])
			case !sameDefault(m[2], f):
				t.Errorf("%s: %s (default %s), but serve --help says %q", doc, m[1], m[2], f.DefValue)
			}
		}
		if rows == 0 {
			t.Errorf("%s names no flag with its default: the check reads nothing", doc)
		}
	}
}

// splitCell is a table cell's comma-separated values, without backticks.
func splitCell(c string) []string {
	var out []string
	for _, v := range strings.Split(c, ", ") {
		out = append(out, strings.Trim(strings.TrimSpace(v), "`"))
	}
	return out
}

func at(ss []string, i int) string {
	if len(ss) == 1 {
		return ss[0]
	}
	if i < len(ss) {
		return ss[i]
	}
	return ""
}

// sameDefault reports whether doc, a default as a document writes it
// ("1m", "512 MiB", "1,000,000", "off", "15 s"), is f's default.
func sameDefault(doc string, f *flag.Flag) bool {
	doc = strings.TrimSpace(strings.Trim(strings.TrimSpace(doc), "`"))
	doc, _, _ = strings.Cut(doc, "` (") // "`0` (off)"
	def := strings.Trim(f.DefValue, `"`)
	switch doc {
	case "off", "empty (none)", "", "false":
		return def == "" || def == "0" || def == "0s" || def == "false"
	}
	if d, err := time.ParseDuration(strings.ReplaceAll(strings.ReplaceAll(doc, " h", "h"), " s", "s")); err == nil {
		fd, ferr := time.ParseDuration(def)
		return ferr == nil && fd == d || d == 0 && def == "0"
	}
	if n, ok := strings.CutSuffix(doc, " MiB"); ok {
		v, err := strconv.ParseInt(n, 10, 64)
		return err == nil && strconv.FormatInt(v<<20, 10) == def
	}
	if n := strings.ReplaceAll(doc, ",", ""); n != doc {
		return n == def
	}
	if doc == def {
		return true
	}
	// A default worked out by serve ("8 local, 32 object stores" for 0):
	// its numbers are those the help gives.
	nums := regexp.MustCompile(`\d+`).FindAllString(doc, -1)
	for _, n := range nums {
		if !strings.Contains(f.Usage, n) {
			return false
		}
	}
	return len(nums) > 0 && (def == "0" || def == "")
}
