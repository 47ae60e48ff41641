package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/cmd/internal/cli/clitest"
)

// TestUnknownCommand: a first argument that is neither a command nor
// something that can be a store is a mistyped command (exit 2), not a
// store path handed to serve.
func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"serv", "x"}, `did you mean "serve"?`},
		{[]string{"inspcet", "../../testdata/zvf-reference/graph.zarrvectors"}, `did you mean "inspect"?`},
		{[]string{"zarrcat"}, `did you mean "zarr-cat"?`},
	} {
		out, errs, code := runCmd(t, tc.args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", tc.args, code, errs)
		}
		if !strings.Contains(errs, tc.want) || strings.Contains(errs, "open store") {
			t.Errorf("%v: stderr %q does not say %q", tc.args, errs, tc.want)
		}
		if out != "" {
			t.Errorf("%v: stdout %q", tc.args, out)
		}
	}
}

// TestCommandDispatch: what the first argument selects.
func TestCommandDispatch(t *testing.T) {
	dir := t.TempDir()
	local := filepath.Join(dir, "plainname")
	if err := os.Mkdir(local, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, tc := range []struct {
		arg, cmd string
		unknown  bool
	}{
		{"inspect", "inspect", false},
		{"serve", "serve", false},
		{"--addr", "serve", false},
		{"./data/brain.zarrvectors", "serve", false},
		{"brain.zarrvectors", "serve", false},
		{"brain.zarr", "serve", false},
		{"tracts=s3://bucket/tracts.zarrvectors", "serve", false},
		{"s3://bucket/x", "serve", false},
		{"plainname", "serve", false}, // an existing folder
		{"frobnicate", "", true},
		{"validat", "", true},
	} {
		name, _, err := pickCommand(commands(), []string{tc.arg})
		if (err != nil) != tc.unknown || name != tc.cmd {
			t.Errorf("%q: command %q, error %v; want %q (unknown: %v)", tc.arg, name, err, tc.cmd, tc.unknown)
		}
	}
}

// TestCommandHelp: every command's --help says what it does and how to
// call it, and exits 0.
func TestCommandHelp(t *testing.T) {
	t.Parallel()
	for name := range commands() {
		t.Run(name, func(t *testing.T) {
			out, errs, code := runCmd(t, name, "--help")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			clitest.CheckHelp(t, out+errs, "zvfserve "+name)
		})
	}
}

// TestValidateJSONEmptyProblems: a valid store's JSON report has an empty
// list of problems, not null.
func TestValidateJSONEmptyProblems(t *testing.T) {
	t.Parallel()
	out, errs, code := runCmd(t, "validate", "--json", "../../testdata/zvf-reference/graph.zarrvectors")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, `"problems": []`) || strings.Contains(out, "null") {
		t.Fatalf("report:\n%s", out)
	}
}

// TestFormatReported: inspect and validate (text and JSON) say which ZVF
// version a store is and how it is laid out, so a user can tell a 0.7
// store from a 0.9 one without reading its metadata.
func TestFormatReported(t *testing.T) {
	t.Parallel()
	const (
		v07 = "../../testdata/zvf-reference/graph.zarrvectors"
		v09 = "../../testdata/zvf-0.9/mesh_sharded_v09.zarrvectors"
	)
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"inspect", v07}, []string{"zv_version   0.7.0\n", "layout       per_chunk_arrays\n"}},
		{[]string{"inspect", v09}, []string{"zv_version   0.9.0\n", "layout       chunk_grid_arrays, sharded\n"}},
		{[]string{"inspect", "--json", v09}, []string{`"zv_version": "0.9.0"`, `"layout": "chunk_grid_arrays"`, `"sharded": true`}},
		{[]string{"validate", "--no-progress", v07}, []string{": valid (ZVF 0.7.0, per_chunk_arrays; levels 1-5;"}},
		{[]string{"validate", "--no-progress", v09}, []string{": valid (ZVF 0.9.0, chunk_grid_arrays; levels 1-5;"}},
		{[]string{"validate", "--json", v09}, []string{`"zv_version": "0.9.0"`, `"layout": "chunk_grid_arrays"`}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			t.Parallel()
			out, errs, code := runCmd(t, c.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in:\n%s", w, out)
				}
			}
		})
	}
}

// TestBinaryCarriesNoBenchmarks: the zvfserve binary links neither the
// benchmark stores (zvf/synth, which cmd/zvfbench uses) nor test code.
func TestBinaryCarriesNoBenchmarks(t *testing.T) {
	t.Parallel()
	// go test puts its own toolchain first on PATH.
	out, err := exec.Command("go", "list", "-deps", "github.com/zvfserve/zvfserve/cmd/zvfserve").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps lists only %d packages", len(deps))
	}
	for _, p := range deps {
		switch p {
		case "github.com/zvfserve/zvfserve/zvf/synth", "github.com/zvfserve/zvfserve/zvf/zvftest", "testing":
			t.Errorf("zvfserve links %s", p)
		}
	}
}

// TestVersion: zvfserve --version and zvfserve version print the build's
// line (what debug.ReadBuildInfo says of this binary) and exit 0; it
// printed serve's usage and exited 2.
func TestVersion(t *testing.T) {
	t.Parallel()
	want := api.ReadBuild().String() + "\n"
	for _, args := range [][]string{{"--version"}, {"-version"}, {"version"}} {
		out, errs, code := runCmd(t, args...)
		if code != 0 || out != want || errs != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 0 and %q", args, code, out, errs, want)
		}
	}
	if _, errs, code := runCmd(t, "version", "extra"); code != 2 || !strings.Contains(errs, "no arguments") {
		t.Errorf("version extra: exit %d, %q", code, errs)
	}
}

// TestServeSaysItsVersion: serve's start-up line and log say which build
// runs, and /metrics has zvfserve_build_info with its labels.
func TestServeSaysItsVersion(t *testing.T) {
	t.Parallel()
	s := startServe(t, "--admin-addr", "127.0.0.1:0", "../../testdata/zvf-reference/graph.zarrvectors")
	b := api.ReadBuild()
	if !strings.Contains(s.out.String(), "zvfserve "+b.Version+": serving 1 store(s) on http://") {
		t.Errorf("start-up line %q does not name version %s", s.out.String(), b.Version)
	}
	rev := b.RevisionLabel()
	if !regexp.MustCompile(`msg="zvfserve started" version=\S*` + regexp.QuoteMeta(b.Version) + `\S* revision=` + regexp.QuoteMeta(rev) + ` modified=(true|false) go=` +
		regexp.QuoteMeta(b.GoVersion)).MatchString(s.errs.String()) {
		t.Errorf("no start-up log line with the version in %s", s.errs.String())
	}
	resp, err := http.Get(s.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	want := `zvfserve_build_info{goversion="` + b.GoVersion + `",revision="` + rev + `",version="` + b.Version + `"} 1`
	if !strings.Contains(string(body), want) {
		t.Errorf("/metrics has no %s", want)
	}
}

// TestValidateOfAStoreThatDoesNotOpen: the problem of a store refused at
// open names where it failed (the root's metadata here), and the summary
// counts in English. It printed "error   L2  : store …" (no path) and
// "1 problems".
func TestValidateOfAStoreThatDoesNotOpen(t *testing.T) {
	t.Parallel()
	dir := unknownVersionCopy(t, graphStore)
	out, errs, code := runCmd(t, "validate", "--no-progress", dir)
	if code != 1 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"error   L2  zarr.json: ", "0 chunks, 0 objects checked; 1 problem)"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

// TestInspectLinkAttributes: inspect lists a graph's per-edge attributes
// (text and the descriptor JSON) in both layouts, and a store without any
// prints the table and descriptor it did.
func TestInspectLinkAttributes(t *testing.T) {
	t.Parallel()
	const (
		g07  = "../../testdata/zvf-reference/graph.zarrvectors"
		g09  = "../../testdata/zvf-0.9/graph_v09.zarrvectors"
		mesh = "../../testdata/zvf-reference/mesh.zarrvectors"
	)
	cases := []struct {
		args          []string
		want, wantNot []string
	}{
		{[]string{"inspect", g07}, []string{"groups  attributes      link attributes\n", "radius:float32  weight:float32\n"}, nil},
		{[]string{"inspect", g09}, []string{"groups  attributes      link attributes\n", "radius:float32  weight:float32\n"}, nil},
		{[]string{"inspect", "--json", g09}, []string{`"link_attributes": [
        {
          "name": "weight",
          "dtype": "float32",
          "channels": 1
        }
      ]`}, nil},
		{[]string{"inspect", mesh}, []string{"groups  attributes\n0 "}, []string{"link attributes"}},
		{[]string{"inspect", "--json", mesh}, []string{`"vertex_attributes"`}, []string{"link_attributes"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			t.Parallel()
			out, errs, code := runCmd(t, c.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in:\n%s", w, out)
				}
			}
			for _, w := range c.wantNot {
				if strings.Contains(out, w) {
					t.Errorf("%q in:\n%s", w, out)
				}
			}
		})
	}
}
