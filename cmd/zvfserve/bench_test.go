package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchSmall runs the load benchmark on small in-memory stores: every
// query kind answers without errors, streamlines included.
func TestBenchSmall(t *testing.T) {
	out := filepath.Join(t.TempDir(), "report.json")
	stdout, stderr, code := runCmd(t, "bench", "--points", "20000", "--rounds", "1", "--burst", "4", "--json", out)
	if code != 0 {
		t.Fatalf("bench: exit %d: %s %s", code, stdout, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep benchReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, r := range rep.Results {
		if r.Errors != 0 || r.Vertices == 0 {
			t.Errorf("%s %s: %d errors, %d vertices a request", r.Phase, r.Query, r.Errors, r.Vertices)
		}
		kinds[r.Query] = true
	}
	for _, k := range []string{"50k bin", "50k json", "streamlines 50k bin", "streamlines 50k json"} {
		if !kinds[k] {
			t.Errorf("no %q rows in %v", k, kinds)
		}
	}
	if rep.Streamlines != 4000 || !strings.Contains(string(b), "streamlines auto") {
		t.Errorf("report: %d streamline vertices", rep.Streamlines)
	}
}
