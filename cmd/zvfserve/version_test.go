package main

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
)

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
	if !regexp.MustCompile(`msg="zvfserve started" version=\S*` + regexp.QuoteMeta(b.Version) + `\S* revision=\S* modified=(true|false) go=` +
		regexp.QuoteMeta(b.GoVersion)).MatchString(s.errs.String()) {
		t.Errorf("no start-up log line with the version in %s", s.errs.String())
	}
	resp, err := http.Get(s.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	rev := b.Revision
	if rev == "" {
		rev = "unknown"
	}
	want := `zvfserve_build_info{goversion="` + b.GoVersion + `",revision="` + rev + `",version="` + b.Version + `"} 1`
	if !strings.Contains(string(body), want) {
		t.Errorf("/metrics has no %s", want)
	}
}
