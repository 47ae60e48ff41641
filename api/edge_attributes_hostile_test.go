package api_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
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

// TestEdgeAttributesCategorical: a dictionary-encoded link attribute (its
// codes index its categories, as a categorical vertex attribute's do) was
// served as bare int32 codes, its labels nowhere. The descriptor and
// edge_attribute_info now list its categories, JSON gives each edge its
// label (null where the store keeps no value, or for a code outside the
// categories), and Arrow's edges table a dictionary column; f=bin keeps
// the codes, with the categories in its header.
func TestEdgeAttributesCategorical(t *testing.T) {
	t.Parallel()
	s, _ := chainWithLinkAttrs(t, func(a string) string {
		return strings.Replace(a, `"dtype": "int32"`, `"dtype": "int32", "encoding": "dictionary", "categories": ["axon", "dendrite"]`, 1)
	})
	_, ts := newServer(t, api.Options{Stores: []*zvf.Store{s}})
	const info = `{"name":"kind","dtype":"int32","channels":1,"categories":["axon","dendrite"]}`
	if d := string(apitest.MustGet(t, ts, "/api/v1/stores/h")); !strings.Contains(d, `"link_attributes":[`+info) {
		t.Fatalf("descriptor: %s", d)
	}
	const box = "/api/v1/stores/h/bbox?min=0,0,0&max=40,40,40&edge_attributes=kind,s"
	var a struct {
		Info           []json.RawMessage `json:"edge_attribute_info"`
		Edges          [][2]int64        `json:"edges"`
		EdgeAttributes struct {
			Kind []*string `json:"kind"`
			S    []*int    `json:"s"`
		} `json:"edge_attributes"`
	}
	if err := json.Unmarshal(apitest.MustGet(t, ts, box), &a); err != nil {
		t.Fatal(err)
	}
	if len(a.Info) != 2 || string(a.Info[0]) != info {
		t.Fatalf("edge_attribute_info %s", a.Info)
	}
	labels := []string{"axon", "dendrite"}
	nulls := 0
	for i := range a.Edges {
		k, s := a.EdgeAttributes.Kind[i], a.EdgeAttributes.S[i]
		switch {
		case s == nil && k == nil:
			nulls++
		case s == nil || k == nil || *k != labels[*s%2]:
			t.Fatalf("edge %d: kind %v, s %v", i, k, s)
		}
	}
	if len(a.Edges) != 29 || nulls != 2 {
		t.Fatalf("%d edges, %d without values", len(a.Edges), nulls)
	}
	if h, _ := binBlocks(t, apitest.MustGet(t, ts, box+"&f=bin")); !strings.Contains(string(h), `"edge_attribute_info":[`+info) {
		t.Fatalf("binary header %s", h)
	}
	as := readArrow(t, apitest.MustGet(t, ts, box+"&f=arrow&table=edges"))
	if f := as.schema.Field(2); f.Name != "kind" || f.Type.ID() != arrow.DICTIONARY {
		t.Fatalf("edges table %s", as.schema)
	}
	row := 0
	for _, rec := range as.batches {
		kind, seq := rec.Column(2).(*array.Dictionary), rec.Column(3).(*array.Int32)
		for i := range int(rec.NumRows()) {
			want := "null"
			if !seq.IsNull(i) {
				want = labels[seq.Value(i)%2]
			}
			got := "null"
			if !kind.IsNull(i) {
				got = kind.Dictionary().(*array.String).Value(kind.GetValueIndex(i))
			}
			if got != want || got != strOr(a.EdgeAttributes.Kind[row]) {
				t.Fatalf("arrow edge %d: %s, want %s (JSON %s)", row, got, want, strOr(a.EdgeAttributes.Kind[row]))
			}
			row++
		}
	}
	if row != len(a.Edges) {
		t.Fatalf("arrow: %d edges, JSON %d", row, len(a.Edges))
	}
}

func strOr(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}

// TestArrowEdgesColumnNames: a link attribute named v0 or v1, like the
// edges table's index columns, gave f=arrow&table=edges two columns of
// one name, which readers take by name (pandas, polars, DuckDB) and so
// confuse or refuse. Such an answer is a 422 naming the column; the
// others, and JSON, carry it as before.
func TestArrowEdgesColumnNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	g := &writer.Graph{Positions: []float32{1, 1, 1, 2, 2, 2, 3, 3, 3}, Edges: []int64{1, 0, 2, 1}}
	g.LinkAttributes = []writer.Attribute{writer.Float32Attribute("v1", 1, []float32{0.5, 1.5}), writer.Float32Attribute("w", 1, []float32{2, 3})}
	if _, err := writer.WriteGraph(ctx, mem, "g", g, writer.Options{ChunkShape: []float64{50, 50, 50}}); err != nil {
		t.Fatal(err)
	}
	_, ts := newServer(t, api.Options{Stores: []*zvf.Store{zvftest.OpenSub(t, mem, "g", cache.New(1<<20))}})
	const box = "/api/v1/stores/g/bbox?min=0,0,0&max=9,9,9&f=arrow&table=edges&edge_attributes="
	for _, path := range []string{box + "*", box + "v1", "/api/v1/stores/g/objects/0?f=arrow&table=edges&edge_attributes=v1"} {
		resp, body := apitest.Get(t, ts, path)
		if resp.StatusCode != 422 || !strings.Contains(string(body), `two columns named \"v1\"`) {
			t.Errorf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
	if as := readArrow(t, apitest.MustGet(t, ts, box+"w")); as.schema.NumFields() != 3 || as.rows != 2 {
		t.Errorf("edge_attributes=w: %s, %d rows", as.schema, as.rows)
	}
	if j := string(apitest.MustGet(t, ts, "/api/v1/stores/g/bbox?min=0,0,0&max=9,9,9&edge_attributes=*")); !strings.Contains(j, `"edge_attributes":{"v1":[0.5,1.5],"w":[2,3]}`) {
		t.Errorf("JSON: %s", j)
	}
}

// TestEdgeAttributesNonFiniteAndWide pins what a careful client reads of
// values JSON cannot or may not hold: a NaN or infinite edge value is
// null in JSON (valid JSON; JSON has neither), while f=bin marks the
// edge as having a value and carries it, so a client that must tell a
// NaN weight from an edge without one asks f=bin or Arrow; an int64 past
// 2^53 is printed exactly.
func TestEdgeAttributesNonFiniteAndWide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	g := &writer.Graph{Positions: []float32{1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4}, Edges: []int64{1, 0, 2, 1, 3, 2}}
	var big []byte
	for _, v := range []int64{1<<53 + 1, -(1 << 62) - 3, math.MaxInt64} {
		big = binary.LittleEndian.AppendUint64(big, uint64(v))
	}
	g.LinkAttributes = []writer.Attribute{{Name: "big", DType: "int64", Channels: 1, Data: big},
		writer.Float32Attribute("w", 1, []float32{float32(math.NaN()), float32(math.Inf(1)), 2})}
	if _, err := writer.WriteGraph(ctx, mem, "g", g, writer.Options{ChunkShape: []float64{50, 50, 50}}); err != nil {
		t.Fatal(err)
	}
	_, ts := newServer(t, api.Options{Stores: []*zvf.Store{zvftest.OpenSub(t, mem, "g", cache.New(1<<20))}})
	const box = "/api/v1/stores/g/bbox?min=0,0,0&max=9,9,9&edge_attributes=big,w"
	j := apitest.MustGet(t, ts, box)
	if !json.Valid(j) || !strings.Contains(string(j), `"edge_attributes":{"big":[9007199254740993,-4611686018427387907,9223372036854775807],"w":[null,null,2]}`) {
		t.Fatalf("JSON: %s", j)
	}
	_, blocks := binBlocks(t, apitest.MustGet(t, ts, box+"&f=bin"))
	var w []byte
	for _, b := range blocks {
		if b.kind == 7 && b.aux == 1 {
			w = b.payload
		}
	}
	if len(w) != 8+12 || w[0] != 7 {
		t.Fatalf("f=bin w block % x: want every edge marked as having a value", w)
	}
	if v0, v1 := math.Float32frombits(binary.LittleEndian.Uint32(w[8:])), math.Float32frombits(binary.LittleEndian.Uint32(w[12:])); !math.IsNaN(float64(v0)) || !math.IsInf(float64(v1), 1) {
		t.Fatalf("f=bin w: %v %v, want NaN +Inf", v0, v1)
	}
}

// TestEdgeAttributesLevelAuto: level=auto chose among all levels, and a
// coarse level keeps no link attributes, so a box whose level 0 would
// not fit the limit answered edge_attributes=w with a 404 (no link
// attribute "w" at level 1) though level 0 has it. level=auto with
// edge_attributes now chooses among the levels that hold them, as it
// does for vertex attributes: level 0 here, paged.
func TestEdgeAttributesLevelAuto(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	g := &writer.Graph{}
	var w []float32
	for i := range 200 {
		g.Positions = append(g.Positions, float32(i%40), float32(i/40)*8, float32(i%7))
		g.ObjectIDs = append(g.ObjectIDs, int64(i/40))
		if i%40 != 0 {
			g.Edges = append(g.Edges, int64(i), int64(i-1))
			w = append(w, float32(i))
		}
	}
	g.LinkAttributes = []writer.Attribute{writer.Float32Attribute("w", 1, w)}
	if _, err := writer.WriteGraph(ctx, mem, "g", g, writer.Options{ChunkShape: []float64{10, 10, 10}, Pyramid: []writer.PyramidLevel{{Coarsen: 4}}}); err != nil {
		t.Fatal(err)
	}
	_, ts := newServer(t, api.Options{Stores: []*zvf.Store{zvftest.OpenSub(t, mem, "g", cache.New(4<<20))}})
	const box = "/api/v1/stores/g/bbox?min=0,0,0&max=40,40,40&level=auto&limit=20"
	var plain struct{ Level int }
	if err := json.Unmarshal(apitest.MustGet(t, ts, box), &plain); err != nil || plain.Level == 0 {
		t.Fatalf("without edge_attributes level=auto chose level %d (%v): the box tests nothing", plain.Level, err)
	}
	resp, body := apitest.Get(t, ts, box+"&edge_attributes=w")
	var a struct {
		Level          int
		Edges          [][2]int64
		EdgeAttributes map[string][]*float64 `json:"edge_attributes"`
	}
	if err := json.Unmarshal(body, &a); resp.StatusCode != 200 || err != nil || a.Level != 0 || len(a.EdgeAttributes["w"]) != len(a.Edges) {
		t.Fatalf("edge_attributes=w: %d %s", resp.StatusCode, body)
	}
}

// TestEdgeAttributesChannelsPastSampledChunks: a ZVF 0.7 link attribute
// names no channels (nor does a 0.9 one without row_shape, as this
// graph's 0.9 copy), so the level works them out from a chunk's bytes;
// it looked only at the first chunks, and a graph whose first chunks
// hold lone vertices (no links) left a two-channel attribute declared
// as one: the descriptor said channels 1, and an f=bin answer was a 500
// (an edge attribute of 2 channels where the header said 1; past the
// first buffer, a stream broken off). The chunks that hold the
// attribute are sampled instead.
func TestEdgeAttributesChannelsPastSampledChunks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	g := &writer.Graph{}
	for i := range 12 { // a lone vertex in each of the first 12 chunks
		g.Positions = append(g.Positions, float32(10*i+5), 5, 5)
	}
	var pair []byte
	for i := range 20 { // then a chain, in chunks after them
		g.Positions = append(g.Positions, float32(200+i), 5, 5)
		if i > 0 {
			g.Edges = append(g.Edges, int64(12+i), int64(11+i))
			pair = binary.LittleEndian.AppendUint32(pair, uint32(i))
			pair = binary.LittleEndian.AppendUint32(pair, uint32(100+i))
		}
	}
	g.LinkAttributes = []writer.Attribute{{Name: "pair", DType: "int32", Channels: 2, Data: pair}}
	if _, err := writer.WriteGraph(ctx, mem, "g", g, writer.Options{ChunkShape: []float64{10, 10, 10}}); err != nil {
		t.Fatal(err)
	}
	g07 := zvftest.OpenSub(t, mem, "g", cache.New(4<<20))
	// The 0.9 copy's link attribute arrays give no row_shape either.
	sub, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	if err := zvftest.To09(ctx, storage.Sub(mem, "g"), sub, zvftest.To09Options{}); err != nil {
		t.Fatal(err)
	}
	g09, err := zvf.Open(ctx, sub, zvf.Options{Name: "g09"})
	if err != nil {
		t.Fatal(err)
	}
	_, ts := newServer(t, api.Options{Stores: []*zvf.Store{g07, g09}})
	for _, name := range []string{"g", "g09"} {
		if d := string(apitest.MustGet(t, ts, "/api/v1/stores/"+name)); !strings.Contains(d, `"link_attributes":[{"name":"pair","dtype":"int32","channels":2}]`) {
			t.Fatalf("%s descriptor: %s", name, d)
		}
		box := "/api/v1/stores/" + name + "/bbox?min=0,0,0&max=300,10,10&edge_attributes=pair"
		header, blocks := binBlocks(t, apitest.MustGet(t, ts, box+"&f=bin"))
		var vals []byte
		for _, b := range blocks {
			if b.kind == 7 {
				vals = b.payload
			}
		}
		if !strings.Contains(string(header), `{"name":"pair","dtype":"int32","channels":2}`) || len(vals) != 8+19*8 {
			t.Fatalf("%s f=bin: header %s, edge attribute block of %d bytes", name, header, len(vals))
		}
	}
}
