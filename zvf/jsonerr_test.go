package zvf_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestMetadataOfTheWrongJSONTypeSaysSoInJSONTerms: a metadata field of
// the wrong JSON type (an object where a list belongs, a string where a
// number does) is corrupt, and the message — which the API sends as the
// 422's detail — names the field and the JSON types, not the server's Go
// types: it was encoding/json's own text, "cannot unmarshal object into
// Go struct field .nonempty_chunks of type []string".
func TestMetadataOfTheWrongJSONTypeSaysSoInJSONTerms(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := zvftest.CopyTree(t, filepath.Join(fixtures09, "graph_v09.zarrvectors"))
	for _, tc := range []struct {
		name, file string
		path       []string
		value      any
		want       []string
	}{
		{"nonempty_chunks an object", "0/vertices/zarr.json", []string{"attributes", "nonempty_chunks"}, map[string]any{"a": 1},
			[]string{"nonempty_chunks", "an object", "a list"}},
		{"chunk_shape a string", "zarr.json", []string{"attributes", "zarr_vectors", "chunk_shape"}, "x",
			[]string{"chunk_shape", "a string", "a list"}},
		{"level vertex_count a string", "0/zarr.json", []string{"attributes", "zarr_vectors_level", "vertex_count"}, "x",
			[]string{"vertex_count", "a string", "number"}},
		{"array shape a string", "0/vertices/zarr.json", []string{"shape"}, "11",
			[]string{"shape", "a string", "a list"}},
		{"chunk grid chunk_shape an object", "0/vertices/zarr.json", []string{"chunk_grid", "configuration", "chunk_shape"}, map[string]any{},
			[]string{"chunk_shape", "an object", "a list"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mutate(t, filepath.Join(dir, filepath.FromSlash(tc.file)), func(b []byte) []byte {
				var doc map[string]any
				if err := json.Unmarshal(b, &doc); err != nil {
					t.Fatal(err)
				}
				m := doc
				for _, k := range tc.path[:len(tc.path)-1] {
					m = m[k].(map[string]any)
				}
				m[tc.path[len(tc.path)-1]] = tc.value
				out, err := json.Marshal(doc)
				if err != nil {
					t.Fatal(err)
				}
				return out
			})
			_, err := zvf.Open(ctx, zvftest.Store(t, dir), zvf.Options{Name: "g"})
			var ze *zvf.Error
			if !errors.As(err, &ze) || !errors.Is(err, zvf.ErrCorrupt) {
				t.Fatalf("err = %v, want a *zvf.Error of kind corrupt", err)
			}
			msg := ze.Detail()
			for _, bad := range []string{"Go ", "struct", "[]", "float64", "int64", " json:"} {
				if strings.Contains(msg, bad) {
					t.Errorf("%q names %q", msg, bad)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q does not say %q", msg, w)
				}
			}
		})
	}
}
