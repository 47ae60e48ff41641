package api_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestQueryablesWhereLevelsDiffer: a property whose type differs between
// levels (intensity: float32 at level 0, int32 at level 1). Asked for one
// level, the queryables give that level's type; asked for all, a type
// every level's values fit (number), no single stored type or integer
// range, and each level's own in x-zvf-by-level, the description saying
// so. Before, the whole-store answer gave level 0's float32 as the type of
// every level, where level 1 holds integers.
func TestQueryablesWhereLevelsDiffer(t *testing.T) {
	t.Parallel()
	dir := zvftest.CopyTree(t, filepath.Join(fixtures09, "points_pyramid_v09.zarrvectors"))
	meta := filepath.Join(dir, "1", "vertex_attributes", "intensity", "zarr.json")
	b, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	patched := strings.Replace(string(b), `"dtype": "float32"`, `"dtype": "int32"`, 1)
	if patched == string(b) {
		t.Fatalf("no float32 dtype in %s", b)
	}
	if err := os.WriteFile(meta, []byte(patched), 0o644); err != nil {
		t.Fatal(err)
	}
	s := apitest.Open(t, dir, "p", cache.New(1<<20))
	h := apitest.New(t, api.Options{Stores: []*zvf.Store{s}}).Handler()
	type schema struct {
		Description string             `json:"description"`
		Type        any                `json:"type"`
		Minimum     *float64           `json:"minimum"`
		Maximum     *float64           `json:"maximum"`
		DType       string             `json:"x-zvf-dtype"`
		Levels      []int              `json:"x-zvf-levels"`
		ByLevel     map[string]*schema `json:"x-zvf-by-level"`
	}
	get := func(q string) map[string]*schema {
		t.Helper()
		code, _, body := serve(t, h, "/api/v1/stores/p/queryables"+q)
		var doc struct{ Properties map[string]*schema }
		if code != 200 || json.Unmarshal(body, &doc) != nil || doc.Properties["intensity"] == nil {
			t.Fatalf("queryables%s: %d %s", q, code, body)
		}
		return doc.Properties
	}
	for q, want := range map[string]struct {
		typ, dtype string
		bounded    bool
	}{"?level=0": {"number", "float32", false}, "?level=1": {"integer", "int32", true}} {
		p := get(q)["intensity"]
		if p.Type != want.typ || p.DType != want.dtype || (p.Minimum != nil) != want.bounded || p.ByLevel != nil {
			t.Errorf("queryables%s: intensity %+v, want type %s, x-zvf-dtype %s", q, *p, want.typ, want.dtype)
		}
	}
	all := get("")
	p := all["intensity"]
	if p.Type != "number" || p.DType != "" || p.Minimum != nil || p.Maximum != nil || !slices.Equal(p.Levels, []int{0, 1}) ||
		!strings.Contains(p.Description, "x-zvf-by-level") || !strings.Contains(p.Description, "level=") {
		t.Fatalf("intensity over all levels: %+v; want type number, no single x-zvf-dtype or bounds, levels [0 1], a description naming x-zvf-by-level", *p)
	}
	l0, l1 := p.ByLevel["0"], p.ByLevel["1"]
	if len(p.ByLevel) != 2 || l0 == nil || l1 == nil || l0.Type != "number" || l0.DType != "float32" ||
		l1.Type != "integer" || l1.DType != "int32" || l1.Minimum == nil || *l1.Minimum != -2147483648 {
		t.Fatalf("x-zvf-by-level %+v", p.ByLevel)
	}
	// A property the levels agree on keeps one schema.
	if q := all["object_id"]; q == nil || q.Type != "integer" || q.ByLevel != nil || !slices.Equal(q.Levels, []int{0, 1}) || q.Minimum == nil {
		t.Fatalf("object_id: %+v", q)
	}
}

// TestLevelAutoFilterWhereChannelsDiffer: a valid store whose vertex
// attribute has one channel at level 0 and two at level 1 (intensity
// there is intensity[0] and intensity[1]). The queryables say so, and
// level=auto with a filter chooses among the levels where the filter is
// valid, as they promise: filter=intensity>50 is answered from level 0
// even when the budget would pick level 1, and intensity[1] from level 1.
// Before, level=auto chose level 1 for the first and answered 400
// bad-filter ("intensity has 2 channels"), which level 0 would have served.
func TestLevelAutoFilterWhereChannelsDiffer(t *testing.T) {
	t.Parallel()
	dir := zvftest.CopyTree(t, filepath.Join(fixtures09, "points_pyramid_v09.zarrvectors"))
	cells, err := filepath.Glob(filepath.Join(dir, "1", "vertex_attributes", "intensity", "c", "*", "*", "*"))
	if err != nil || len(cells) == 0 {
		t.Fatalf("level 1 intensity cells: %v %v", cells, err)
	}
	// Each cell is one vlen-bytes element: a count (1), a length, then a
	// float32 a vertex; it becomes two, v and 2v.
	for _, c := range cells {
		b, err := os.ReadFile(c)
		if err != nil {
			t.Fatal(err)
		}
		if binary.LittleEndian.Uint32(b) != 1 || int(binary.LittleEndian.Uint32(b[4:]))+8 != len(b) {
			t.Fatalf("%s is not one vlen-bytes element", c)
		}
		var two []byte
		for i := 8; i+4 <= len(b); i += 4 {
			v := math.Float32frombits(binary.LittleEndian.Uint32(b[i:]))
			two = binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(two, math.Float32bits(v)), math.Float32bits(2*v))
		}
		out := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 1), uint32(len(two)))
		if err := os.WriteFile(c, append(out, two...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := apitest.Open(t, dir, "p", cache.New(1<<20))
	h := apitest.New(t, api.Options{Stores: []*zvf.Store{s}}).Handler()
	code, _, body := serve(t, h, "/api/v1/stores/p/queryables")
	var doc struct {
		Properties map[string]struct {
			Levels []int `json:"x-zvf-levels"`
		}
	}
	if code != 200 || json.Unmarshal(body, &doc) != nil || !slices.Equal(doc.Properties["intensity"].Levels, []int{0}) ||
		!slices.Equal(doc.Properties["intensity[1]"].Levels, []int{1}) {
		t.Fatalf("queryables: %d %s", code, body)
	}
	const box = "/api/v1/stores/p/bbox?min=0,0,0&max=1000,1000,1000&limit=5&filter="
	for _, tc := range []struct {
		filter string
		level  string
	}{{"intensity%3E50", "0"}, {"intensity%5B1%5D%3E50", "1"}} {
		_, _, want := serve(t, h, box+tc.filter+"&level="+tc.level)
		code, _, got := serve(t, h, box+tc.filter+"&level=auto")
		var a, b struct {
			Level    *int
			Vertices json.RawMessage
		}
		if code != 200 || json.Unmarshal(got, &a) != nil || json.Unmarshal(want, &b) != nil || a.Level == nil || b.Level == nil ||
			*a.Level != *b.Level || len(a.Vertices) < 10 || !bytes.Equal(a.Vertices, b.Vertices) {
			t.Errorf("level=auto, filter %s: %d %.300s\nwant level %s's answer %.200s", tc.filter, code, got, tc.level, want)
		}
	}
}
