package zvf_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestValidateDeclaredBounds: the root's bounds are the data's inclusive
// box (the catalog, the viewer's camera and Neuroglancer's info show
// them), and validate said a store was valid whose bounds were reversed
// (min past max: a box holding nothing) or missed most of its rows.
// Bounds reversed on an axis are an error of check 2; rows outside them a
// warning of check 3, one a level, naming how many and the farthest row —
// except a float32 row rounded from a float64 bound, which lies on it.
func TestValidateDeclaredBounds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := copyFixture(t, "graph")
	setBounds := func(t *testing.T, lo, hi []float64) {
		mutate(t, filepath.Join(dir, "zarr.json"), func(b []byte) []byte {
			var doc map[string]any
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			doc["attributes"].(map[string]any)["zarr_vectors"].(map[string]any)["bounds"] = [][]float64{lo, hi}
			out, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			return out
		})
	}
	// moveRow puts the first row of chunk 3.4.2 (in [300,400)×[400,500)×[200,300)) at x.
	moveRow := func(t *testing.T, x float32) {
		mutate(t, filepath.Join(dir, "0/vertices/3.4.2/c/0"), func(b []byte) []byte {
			for i, v := range []float32{x, 450, 250} {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
			}
			return b
		})
	}
	boundsProblems := func(rep *zvf.Report) []zvf.Problem {
		var out []zvf.Problem
		for _, p := range rep.Problems {
			if strings.Contains(p.Message, "bounds") {
				out = append(out, p)
			}
		}
		return out
	}
	cases := []struct {
		name    string
		setup   func(t *testing.T)
		sev     string
		check   int
		path    string
		want    []string
		invalid bool
	}{
		{"the reference store", func(*testing.T) {}, "", 0, "", nil, false},
		{"reversed on y", func(t *testing.T) { setBounds(t, []float64{0, 1000, 0}, []float64{1000, 0, 1000}) },
			"error", 2, "zarr.json", []string{"bounds: min 1000 is greater than max 0 on axis 1"}, true},
		{"rows past the upper bound", func(t *testing.T) {
			setBounds(t, []float64{0, 0, 0}, []float64{1000, 1000, 1000})
			moveRow(t, 1000.001)
		}, "warning", 3, "0/vertices/3.4.2", []string{"1 of ", "rows of level 0 lie outside the store's bounds [0 0 0] – [1000 1000 1000]", "farthest 0.0009765625 from them: (1000.001, 450, 250)"}, false},
		{"a float32 row on a float64 bound", func(t *testing.T) {
			setBounds(t, []float64{0, 0, 0}, []float64{1000.0001, 1000, 1000})
			moveRow(t, 1000.0001) // rounds to 1000.00012…, past the float64 bound
		}, "", 0, "", nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.setup(t)
			rep := zvf.Validate(ctx, zvftest.Store(t, dir), "graph", 5, nil)
			got := boundsProblems(rep)
			if c.sev == "" {
				if len(got) != 0 {
					t.Fatalf("problems about bounds: %+v", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("want one problem about bounds, got %+v (all: %+v)", got, rep.Problems)
			}
			p := got[0]
			if p.Severity != c.sev || p.Check != c.check || p.Path != c.path {
				t.Errorf("got %s L%d at %s, want %s L%d at %s", p.Severity, p.Check, p.Path, c.sev, c.check, c.path)
			}
			for _, w := range c.want {
				if !strings.Contains(p.Message, w) {
					t.Errorf("message %q does not say %q", p.Message, w)
				}
			}
			if c.invalid && rep.OK() {
				t.Errorf("validate says the store is valid: %+v", rep.Problems)
			}
		})
	}
}
