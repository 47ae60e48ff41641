package api_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
)

// TestArrowEdgeAttributesNode: f=arrow&table=edges&edge_attributes=…, as
// npm apache-arrow reads it, holds after v0 and v1 a nullable column per
// link attribute whose rows are the JSON answer's edge_attributes (null
// where it is null: the 0.7 graph's cross-chunk edges), for both
// reference graphs; without edge_attributes the table is v0 and v1 alone.
func TestArrowEdgeAttributesNode(t *testing.T) {
	t.Parallel()
	ch := cache.New(64 << 20)
	h := apitest.New(t, api.Options{Stores: []*zvf.Store{
		apitest.Open(t, filepath.Join(fixtures, "graph.zarrvectors"), "graph", ch),
		apitest.Open(t, filepath.Join(fixtures09, "graph_v09.zarrvectors"), "graph_v09", ch),
	}}).Handler()
	const box = "/bbox?min=0,0,0&max=1000,1000,1000"
	bodies := map[string][]byte{}
	for _, st := range []string{"graph", "graph_v09"} {
		_, bodies[st] = serveOK(t, h, "/api/v1/stores/"+st+box+"&f=arrow&table=edges&edge_attributes=weight")
		_, bodies[st+" plain"] = serveOK(t, h, "/api/v1/stores/"+st+box+"&f=arrow&table=edges")
	}
	const object = "/api/v1/stores/graph/objects/1?f=arrow&table=edges&edge_attributes=*"
	_, bodies["graph object"] = serveOK(t, h, object)
	chunks := map[string]string{} // a chunk of each graph with links
	for _, st := range []string{"graph", "graph_v09"} {
		chunks[st] = linkedChunk(t, h, st)
		_, bodies[st+" chunk"] = serveOK(t, h, chunks[st]+"?f=arrow&table=edges&edge_attributes=weight")
	}
	read := runNodeArrow(t, bodies)
	for _, st := range []string{"graph", "graph_v09"} {
		// The chunk route's table=edges is its links, a weight each.
		t.Run(st+" chunk", func(t *testing.T) {
			_, jb := serveOK(t, h, chunks[st]+"?edge_attributes=weight")
			var j struct {
				Links          [][2]int64                   `json:"links"`
				EdgeAttributes map[string][]json.RawMessage `json:"edge_attributes"`
			}
			if err := json.Unmarshal(jb, &j); err != nil {
				t.Fatal(err)
			}
			nt := read[st+" chunk"]
			if len(nt.Fields) != 3 || nt.Fields[2].Name != "weight" || nt.Fields[2].Type != "Float32" || nt.Rows != len(j.Links) {
				t.Fatalf("fields %+v, %d rows; JSON %d links", nt.Fields, nt.Rows, len(j.Links))
			}
			for i, e := range j.Links {
				f, err := strconv.ParseFloat(string(nt.Columns["weight"][i]), 64)
				if err != nil {
					t.Fatalf("link %d: weight %s", i, nt.Columns["weight"][i])
				}
				got := strconv.FormatFloat(float64(float32(f)), 'g', -1, 32)
				if got != string(j.EdgeAttributes["weight"][i]) || string(nt.Columns["v0"][i]) != strconv.FormatInt(e[0], 10) || string(nt.Columns["v1"][i]) != strconv.FormatInt(e[1], 10) {
					t.Fatalf("link %d: %s-%s weight %s; JSON %v %s", i, nt.Columns["v0"][i], nt.Columns["v1"][i], got, e, j.EdgeAttributes["weight"][i])
				}
			}
		})
	}
	t.Run("graph object", func(t *testing.T) {
		_, jb := serveOK(t, h, "/api/v1/stores/graph/objects/1?f=json&edge_attributes=*")
		var j struct {
			Edges          [][2]int64                   `json:"edges"`
			EdgeAttributes map[string][]json.RawMessage `json:"edge_attributes"`
		}
		if err := json.Unmarshal(jb, &j); err != nil {
			t.Fatal(err)
		}
		nt := read["graph object"]
		if len(nt.Fields) != 3 || nt.Fields[2].Name != "weight" || nt.Rows != len(j.Edges) || nt.Rows == 0 {
			t.Fatalf("fields %+v, %d rows; JSON %d edges", nt.Fields, nt.Rows, len(j.Edges))
		}
		for i, v := range nt.Columns["weight"] {
			got := string(v)
			if got != "null" {
				f, _ := strconv.ParseFloat(got, 64)
				got = strconv.FormatFloat(float64(float32(f)), 'g', -1, 32)
			}
			if want := string(j.EdgeAttributes["weight"][i]); got != want {
				t.Fatalf("edge %d: %s, JSON %s", i, got, want)
			}
		}
	})
	for _, st := range []string{"graph", "graph_v09"} {
		t.Run(st, func(t *testing.T) {
			_, jb := serveOK(t, h, "/api/v1/stores/"+st+box+"&f=json&edge_attributes=weight")
			var j struct {
				Edges          [][2]int64                   `json:"edges"`
				EdgeAttributes map[string][]json.RawMessage `json:"edge_attributes"`
			}
			if err := json.Unmarshal(jb, &j); err != nil {
				t.Fatal(err)
			}
			nt := read[st]
			if len(nt.Fields) != 3 || nt.Fields[0].Name != "v0" || nt.Fields[1].Name != "v1" || nt.Fields[2].Name != "weight" || nt.Fields[2].Type != "Float32" {
				t.Fatalf("fields %+v", nt.Fields)
			}
			if nt.Rows != len(j.Edges) || len(j.EdgeAttributes["weight"]) != len(j.Edges) {
				t.Fatalf("%d rows, JSON %d edges and %d weights", nt.Rows, len(j.Edges), len(j.EdgeAttributes["weight"]))
			}
			nulls := 0
			for i, e := range j.Edges {
				for k := range 2 {
					if got := string(nt.Columns["v"+strconv.Itoa(k)][i]); got != strconv.FormatInt(e[k], 10) {
						t.Fatalf("edge %d v%d: %s, JSON %d", i, k, got, e[k])
					}
				}
				got, want := string(nt.Columns["weight"][i]), string(j.EdgeAttributes["weight"][i])
				if got != "null" {
					f, err := strconv.ParseFloat(got, 64)
					if err != nil {
						t.Fatal(err)
					}
					got = strconv.FormatFloat(float64(float32(f)), 'g', -1, 32)
				}
				if got != want {
					t.Fatalf("edge %d: weight %s, JSON %s", i, got, want)
				}
				if got == "null" {
					nulls++
				}
			}
			if wantNulls := map[string]int{"graph": 200, "graph_v09": 0}[st]; nulls != wantNulls {
				t.Fatalf("%d edges without a weight, want %d", nulls, wantNulls)
			}
			if p := read[st+" plain"]; len(p.Fields) != 2 || p.Rows != nt.Rows {
				t.Fatalf("without edge_attributes: fields %+v, %d rows", p.Fields, p.Rows)
			}
		})
	}
}

// linkedChunk is the path of the first chunk of store st's level 0 that
// holds links.
func linkedChunk(t *testing.T, h http.Handler, st string) string {
	t.Helper()
	var list struct {
		Chunks []string `json:"chunks"`
	}
	_, b := serveOK(t, h, "/api/v1/stores/"+st+"/levels/0/chunks")
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	for _, k := range list.Chunks {
		path := "/api/v1/stores/" + st + "/levels/0/chunks/" + k
		var c struct {
			Links [][]int64 `json:"links"`
		}
		if _, b := serveOK(t, h, path); json.Unmarshal(b, &c) == nil && len(c.Links) > 0 {
			return path
		}
	}
	t.Fatalf("%s: no chunk with links", st)
	return ""
}
