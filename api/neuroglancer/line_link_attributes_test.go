package neuroglancer_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestLineLinkAttributes: a graph's line annotations are its stored
// edges, so each carries the edge's link attributes as properties, one a
// channel where Neuroglancer has the type (int64 converted to float32,
// with a note), a link attribute of more channels than are served left
// out with a note that says it is a link attribute; a link attribute
// named like a vertex attribute gets its own property. Every record read
// by id and by object, decoded from the info alone, carries the values
// of the input edge it joins (NaN, or 0 for integers, for a cross-chunk
// edge, for which a ZVF 0.7 writer keeps no value).
func TestLineLinkAttributes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	mem, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	g := &writer.Graph{}
	const nv = 40
	for i := range nv {
		g.Positions = append(g.Positions, float32(i)*1.5, float32(i%7), float32(i%3)*4)
		g.ObjectIDs = append(g.ObjectIDs, int64(i/20))
		if i%20 != 0 {
			g.Edges = append(g.Edges, int64(i), int64(i-1))
		}
	}
	ne := len(g.Edges) / 2
	w := make([]float32, ne)
	var n, pair []byte
	for i := range ne {
		w[i] = float32(i) + 0.25
		n = binary.LittleEndian.AppendUint64(n, uint64(1000+i))
		pair = binary.LittleEndian.AppendUint16(pair, uint16(int16(-i)))
		pair = binary.LittleEndian.AppendUint16(pair, uint16(2*i))
	}
	g.Attributes = []writer.Attribute{writer.Float32Attribute("w", 1, make([]float32, nv))}
	g.LinkAttributes = []writer.Attribute{writer.Float32Attribute("w", 1, w), {Name: "n", DType: "int64", Channels: 1, Data: n},
		{Name: "pair", DType: "int16", Channels: 2, Data: pair}, writer.Float32Attribute("wide", 20, make([]float32, 20*ne))}
	if _, err := writer.WriteGraph(ctx, mem, "g", g, writer.Options{ChunkShape: []float64{10, 10, 10}}); err != nil {
		t.Fatal(err)
	}
	st := zvftest.OpenSub(t, mem, "g", cache.New(16<<20))
	_, ts := apitest.Serve(t, api.Options{Stores: []*zvf.Store{st}, Cache: cache.New(16 << 20), NGSharded: neuroglancer.ShardNever})
	body := apitest.MustGet(t, ts, "/ng/g/lines/info")
	inf, err := parseInfo(body)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties []struct{ ID, Type, Description string }
		ZVF        struct {
			Annotations int64
			Attributes  []struct {
				Attribute, Property, Note string
				Link                      bool `json:"link_attribute"`
			}
		} `json:"zvfserve"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{} // link attribute (channel) → property id
	for _, p := range doc.Properties {
		if a, ok := strings.CutPrefix(p.Description, "ZVF link attribute "); ok {
			a = strings.TrimSuffix(a, " of the edge")
			if a, c, ok := strings.Cut(a, " of the edge, channel "); ok {
				ids[a+"_"+c] = p.ID
				continue
			}
			ids[a] = p.ID
		}
	}
	types := map[string]string{}
	for _, p := range inf.Properties {
		types[p.ID] = p.Type
	}
	if len(ids) != 4 || ids["w"] == "w" || types[ids["w"]] != "float32" || types[ids["n"]] != "float32" || types[ids["pair_0"]] != "int16" || types[ids["pair_1"]] != "int16" {
		t.Fatalf("link attribute properties %v (types %v); want w apart from the vertex attribute w, n, pair_0 and pair_1: %s", ids, types, body)
	}
	var converted, wide bool
	for _, nt := range doc.ZVF.Attributes {
		converted = converted || nt.Link && nt.Attribute == "n" && nt.Property == ids["n"] && strings.Contains(nt.Note, "int64 served as float32")
		wide = wide || nt.Link && nt.Attribute == "wide" && strings.Contains(nt.Note, "left out: 20 channels")
	}
	if !converted || !wide {
		t.Fatalf("the info's notes do not say what became of n and wide: %+v", doc.ZVF.Attributes)
	}
	pos := func(v int64) string { return fmt.Sprint(g.Positions[3*v : 3*v+3]) }
	edgeOf := map[string]int{}
	for k := range ne {
		edgeOf[pos(g.Edges[2*k])+"|"+pos(g.Edges[2*k+1])] = k
	}
	chunk := func(v int64) string {
		return fmt.Sprint(math.Floor(float64(g.Positions[3*v])/10), math.Floor(float64(g.Positions[3*v+1])/10), math.Floor(float64(g.Positions[3*v+2])/10))
	}
	check := func(where string, a ngAnnotation, seen map[int]bool) {
		t.Helper()
		k, ok := edgeOf[fmt.Sprint(a.Points[0])+"|"+fmt.Sprint(a.Points[1])]
		if !ok {
			t.Fatalf("%s: a line %v that is no input edge", where, a.Points)
		}
		seen[k] = true
		got := []float64{a.Props[ids["w"]], a.Props[ids["n"]], a.Props[ids["pair_0"]], a.Props[ids["pair_1"]]}
		want := []float64{float64(w[k]), float64(1000 + k), float64(-k), float64(2 * k)}
		if chunk(g.Edges[2*k]) != chunk(g.Edges[2*k+1]) {
			want = []float64{math.NaN(), math.NaN(), 0, 0}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s (input edge %d): w, n, pair %v; want %v", where, k, got, want)
		}
	}
	seen := map[int]bool{}
	for id := range doc.ZVF.Annotations {
		b := apitest.MustGet(t, ts, "/ng/g/lines/"+inf.ByID.Key+"/"+strconv.FormatInt(id, 10))
		a, err := inf.decodeByID(b, uint64(id))
		if err != nil {
			t.Fatalf("by_id %d: %v", id, err)
		}
		check(fmt.Sprintf("by_id %d", id), a, seen)
	}
	if len(seen) != ne {
		t.Fatalf("by_id holds %d of the %d edges", len(seen), ne)
	}
	seen = map[int]bool{}
	for obj := range 2 {
		key := inf.Relationships[0]["key"].(string)
		as, err := inf.decodeList(apitest.MustGet(t, ts, "/ng/g/lines/"+key+"/"+strconv.Itoa(obj)))
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range as {
			check(fmt.Sprintf("object %d line %d", obj, a.ID), a, seen)
		}
	}
	cross := 0
	for k := range ne {
		if chunk(g.Edges[2*k]) != chunk(g.Edges[2*k+1]) {
			cross++
		}
	}
	if len(seen) != ne || cross == 0 || cross == ne {
		t.Fatalf("objects hold %d of the %d edges; %d cross chunks (want some, not all)", len(seen), ne, cross)
	}
}
