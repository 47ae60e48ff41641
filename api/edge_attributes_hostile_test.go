package api_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// chainWithLinkAttrs writes a 30-vertex chain graph whose edges carry
// the int32 link attributes kind (edge i: i%2) and s (edge i: i), then
// rewrites link_attributes/kind's group attributes with edit, as a
// foreign writer might have left them.
func chainWithLinkAttrs(t *testing.T, edit func(attrs string) string) (*zvf.Store, storage.Store) {
	t.Helper()
	ctx := context.Background()
	var g writer.Graph
	for i := range 30 {
		g.Positions = append(g.Positions, float32(i), float32(i)/2, 1)
		if i > 0 {
			g.Edges = append(g.Edges, int64(i), int64(i-1))
		}
	}
	var codes, seq []byte
	for i := range len(g.Edges) / 2 {
		codes = binary.LittleEndian.AppendUint32(codes, uint32(i%2))
		seq = binary.LittleEndian.AppendUint32(seq, uint32(i))
	}
	g.LinkAttributes = []writer.Attribute{{Name: "kind", DType: "int32", Channels: 1, Data: codes}, {Name: "s", DType: "int32", Channels: 1, Data: seq}}
	dir := t.TempDir()
	st, err := blobstore.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if _, err := writer.WriteGraph(ctx, st, "", &g, writer.Options{ChunkShape: []float64{10, 10, 10}}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "0/link_attributes/kind/0/zarr.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(edit(string(b))), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := zvf.Open(ctx, st, zvf.Options{Name: "h"})
	if err != nil {
		t.Fatalf("the store does not open: %v", err)
	}
	return s, st
}

// TestEdgeAttributesUnservedDType: a link attribute of a type the server
// does not read (here numpy's "<U4" strings) took the whole store down
// at open ("unsupported dtype"), though a store's edges and its other
// link attributes are readable without it. The store opens; the
// attribute is left out of the descriptor and of edge_attributes=*, and
// naming it is a 422 that says why; validate warns of it.
func TestEdgeAttributesUnservedDType(t *testing.T) {
	t.Parallel()
	s, st := chainWithLinkAttrs(t, func(a string) string { return strings.Replace(a, `"dtype": "int32"`, `"dtype": "<U4"`, 1) })
	_, ts := newServer(t, api.Options{Stores: []*zvf.Store{s}})
	if d := string(apitest.MustGet(t, ts, "/api/v1/stores/h")); !strings.Contains(d, `"link_attributes":[{"name":"s","dtype":"int32","channels":1}]`) {
		t.Fatalf("descriptor: %s", d)
	}
	var a struct {
		Edges          [][2]int64         `json:"edges"`
		EdgeAttributes map[string][]int64 `json:"edge_attributes"`
	}
	if err := json.Unmarshal(apitest.MustGet(t, ts, "/api/v1/stores/h/bbox?min=0,0,0&max=40,40,40&edge_attributes=*"), &a); err != nil {
		t.Fatal(err)
	}
	if len(a.EdgeAttributes) != 1 || len(a.EdgeAttributes["s"]) != len(a.Edges) || len(a.Edges) != 29 {
		t.Fatalf("edge_attributes=*: %d edges, %v", len(a.Edges), a.EdgeAttributes)
	}
	resp, body := apitest.Get(t, ts, "/api/v1/stores/h/bbox?min=0,0,0&max=40,40,40&edge_attributes=kind")
	if resp.StatusCode != 422 || !strings.Contains(string(body), `link_attributes/kind/0`) || !strings.Contains(string(body), `unsupported dtype \"\u003cU4\"`) {
		t.Fatalf("edge_attributes=kind: %d %s", resp.StatusCode, body)
	}
	r := zvf.Validate(context.Background(), st, "h", 0, nil)
	if !r.OK() || !slices.ContainsFunc(r.Problems, func(p zvf.Problem) bool {
		return p.Severity == "warning" && p.Path == "0/link_attributes/kind/0" && strings.Contains(p.Message, "left out of answers")
	}) {
		t.Fatalf("validate: %+v", r)
	}
}
