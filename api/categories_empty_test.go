package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// TestDictionaryWithoutLabelsSaysCategorical: a dictionary-encoded
// attribute whose categories list is empty is categorical with no label,
// so every value is null (JSON null, an empty Arrow dictionary). Its
// attribute_info left out "categories" (an empty list was omitted), so a
// client read a plain uint8 attribute whose every value was null: the
// descriptor, the JSON answer and the binary header now say
// "categories": [].
func TestDictionaryWithoutLabelsSaysCategorical(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := blobstore.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	p := &writer.PointCloud{Positions: []float32{1, 1, 1, 2, 2, 2}}
	p.Attributes = []writer.Attribute{writer.CategoricalAttribute("c", []string{"a", "b"})}
	if _, err := writer.WritePoints(ctx, st, "s", p, writer.Options{ChunkShape: []float64{4, 4, 4}}); err != nil {
		t.Fatal(err)
	}
	meta := filepath.Join(dir, "s", "0", "vertex_attributes", "c", "zarr.json")
	b, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	patched := regexp.MustCompile(`"categories": *\[[^\]]*\]`).ReplaceAll(b, []byte(`"categories": []`))
	if bytes.Equal(patched, b) {
		t.Fatalf("no categories in %s", b)
	}
	if err := os.WriteFile(meta, patched, 0o644); err != nil {
		t.Fatal(err)
	}
	s := apitest.Open(t, filepath.Join(dir, "s"), "p", cache.New(1<<20))
	h := apitest.New(t, api.Options{Stores: []*zvf.Store{s}}).Handler()

	type attr struct {
		Name       string
		Categories *[]string
	}
	hasEmpty := func(what string, as []attr) {
		t.Helper()
		if len(as) != 1 || as[0].Name != "c" || as[0].Categories == nil || len(*as[0].Categories) != 0 {
			t.Errorf("%s: attribute info %+v, want c with categories []", what, as)
		}
	}
	code, _, body := serve(t, h, "/api/v1/stores/p/bbox?min=0,0,0&max=9,9,9&attributes=c")
	var ans struct {
		AttributeInfo []attr `json:"attribute_info"`
		Attributes    map[string][]any
	}
	if code != 200 || json.Unmarshal(body, &ans) != nil {
		t.Fatalf("bbox: %d %s", code, body)
	}
	hasEmpty("bbox JSON", ans.AttributeInfo)
	if v := ans.Attributes["c"]; len(v) != 2 || v[0] != nil || v[1] != nil {
		t.Errorf("bbox JSON values %v, want [null null]", v)
	}

	code, _, body = serve(t, h, "/api/v1/stores/p")
	var desc struct {
		Levels []struct {
			VertexAttributes []attr `json:"vertex_attributes"`
		}
	}
	if code != 200 || json.Unmarshal(body, &desc) != nil || len(desc.Levels) == 0 {
		t.Fatalf("descriptor: %d %s", code, body)
	}
	hasEmpty("descriptor", desc.Levels[0].VertexAttributes)

	code, _, body = serve(t, h, "/api/v1/stores/p/bbox?min=0,0,0&max=9,9,9&attributes=c&f=bin")
	if code != 200 || !bytes.Contains(body, []byte(`"name":"c","dtype":"uint8","channels":1,"categories":[]}`)) {
		t.Errorf("f=bin: %d, header without categories []: %q", code, body[:min(len(body), 300)])
	}
}
