package api_test

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// TestQueryablesEnumLeavesOutTheNullCode: a categorical attribute whose
// dictionary gives its null code (_FillValue) a label: rows of that code
// are null (JSON null, IS NULL true, = its label false), so the label is
// no value the property takes, and the queryables' enum, the values a
// filter can find, leaves it out. It listed it: a client offering the
// enum as choices got an empty answer for that one.
func TestQueryablesEnumLeavesOutTheNullCode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := blobstore.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	p := &writer.PointCloud{Positions: []float32{1, 1, 1, 2, 2, 2, 3, 3, 3, 5, 5, 5}}
	p.Attributes = []writer.Attribute{writer.CategoricalAttribute("c", []string{"a", "b", "a", "c"})} // codes 0 1 0 2
	if _, err := writer.WritePoints(ctx, st, "s", p, writer.Options{ChunkShape: []float64{4, 4, 4}}); err != nil {
		t.Fatal(err)
	}
	meta := filepath.Join(dir, "s", "0", "vertex_attributes", "c", "zarr.json")
	b, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	patched := strings.Replace(string(b), `"encoding": "dictionary"`, `"encoding": "dictionary", "_FillValue": 1`, 1)
	if patched == string(b) {
		t.Fatalf("no dictionary encoding in %s", b)
	}
	if err := os.WriteFile(meta, []byte(patched), 0o644); err != nil {
		t.Fatal(err)
	}
	s := apitest.Open(t, filepath.Join(dir, "s"), "p", cache.New(1<<20))
	h := apitest.New(t, api.Options{Stores: []*zvf.Store{s}}).Handler()
	const box = "/api/v1/stores/p/count?min=0,0,0&max=9,9,9&filter="
	for f, want := range map[string]int{"c IS NULL": 1, "c = 'b'": 0, "c IN ('a', 'b', 'c')": 3} {
		code, _, body := serve(t, h, box+url.QueryEscape(f))
		var c struct{ Count int }
		if code != 200 || json.Unmarshal(body, &c) != nil || c.Count != want {
			t.Fatalf("%s: %d %s, want %d", f, code, body, want)
		}
	}
	for _, q := range []string{"", "?level=0"} {
		code, _, body := serve(t, h, "/api/v1/stores/p/queryables"+q)
		var doc struct {
			Properties map[string]struct {
				Enum []string `json:"enum"`
			} `json:"properties"`
		}
		if code != 200 || json.Unmarshal(body, &doc) != nil {
			t.Fatalf("queryables%s: %d %s", q, code, body)
		}
		if got := doc.Properties["c"].Enum; !slices.Equal(got, []string{"a", "c"}) {
			t.Errorf("queryables%s: enum %q, want [a c] (b is the null code's label)", q, got)
		}
	}
}
