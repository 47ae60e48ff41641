package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage/faultstore"
)

// The Arrow answers are read back here with arrow-go's own IPC reader
// and held equal to the JSON answer of the same request, value for value:
// every Arrow value is written out as the JSON encoder writes it (shortest
// round-trip floats at their stored precision, NaN and infinities null,
// labels for categorical codes) and compared as text.

// arrowStream is an IPC stream read back.
type arrowStream struct {
	schema  *arrow.Schema
	batches []arrow.RecordBatch
	last    map[string]string // the last batch's custom metadata
	rows    int
}

func readArrow(t testing.TB, body []byte) *arrowStream {
	t.Helper()
	rd, err := ipc.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("arrow-go cannot read the stream: %v (%.200q)", err, body)
	}
	defer rd.Release()
	s := &arrowStream{schema: rd.Schema()}
	for rd.Next() {
		rec := rd.RecordBatch()
		rec.Retain()
		t.Cleanup(rec.Release)
		s.batches = append(s.batches, rec)
		s.rows += int(rec.NumRows())
		s.last = map[string]string{}
		if m, ok := rec.(arrow.RecordBatchWithMetadata); ok {
			md := m.Metadata()
			for i, k := range md.Keys() {
				s.last[k] = md.Values()[i]
			}
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatalf("arrow-go: %v", err)
	}
	if len(s.batches) == 0 {
		t.Fatal("an Arrow answer without a record batch")
	}
	return s
}

// column renders every row of the named column as JSON text.
func (s *arrowStream) column(t testing.TB, name string) []string {
	t.Helper()
	idx := s.schema.FieldIndices(name)
	if len(idx) != 1 {
		t.Fatalf("%d columns named %q in %v", len(idx), name, s.schema)
	}
	var out []string
	for _, rec := range s.batches {
		col := rec.Column(idx[0])
		for i := 0; i < col.Len(); i++ {
			out = append(out, string(arrowJSON(t, nil, col, i)))
		}
	}
	return out
}

// arrowJSON appends value i of arr as the JSON encoder writes it. Called
// per value, it calls t.Helper (a stack walk) only on failure.
func arrowJSON(t testing.TB, dst []byte, arr arrow.Array, i int) []byte {
	if arr.IsNull(i) {
		return append(dst, "null"...)
	}
	float := func(v float64, bits int) []byte {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return append(dst, "null"...)
		}
		return strconv.AppendFloat(dst, v, 'g', -1, bits)
	}
	switch a := arr.(type) {
	case *array.Float32:
		return float(float64(a.Value(i)), 32)
	case *array.Float64:
		return float(a.Value(i), 64)
	case *array.Float16:
		return float(float64(a.Value(i).Float32()), 32)
	case *array.Int8, *array.Int16, *array.Int32, *array.Int64, *array.Uint8, *array.Uint16, *array.Uint32, *array.Uint64, *array.Boolean:
		return append(dst, a.ValueStr(i)...) // decimal integers, true or false: as JSON writes them
	case *array.String:
		b, _ := json.Marshal(a.Value(i))
		return append(dst, b...)
	case *array.Dictionary:
		return arrowJSON(t, dst, a.Dictionary(), a.GetValueIndex(i))
	case *array.FixedSizeList:
		n := int(a.DataType().(*arrow.FixedSizeListType).Len())
		dst = append(dst, '[')
		for k := 0; k < n; k++ {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = arrowJSON(t, dst, a.ListValues(), (a.Offset()+i)*n+k)
		}
		return append(dst, ']')
	case array.ListLike:
		lo, hi := a.ValueOffsets(i)
		dst = append(dst, '[')
		for k := lo; k < hi; k++ {
			if k > lo {
				dst = append(dst, ',')
			}
			dst = arrowJSON(t, dst, a.ListValues(), int(k))
		}
		return append(dst, ']')
	}
	t.Helper()
	t.Fatalf("no JSON for Arrow %s", arr.DataType())
	return nil
}

// arrowPage reduces a vertex-table answer to the page the paging tests
// compare (its columns' rows as JSON text, count and next), and checks
// the stream's shape: the position list, object ids when the level has
// them, and a last batch of no rows that closes it.
func arrowPage(t testing.TB, body []byte) page {
	t.Helper()
	s := readArrow(t, body)
	var p page
	p.numberMatched = -1
	for _, f := range s.schema.Fields() {
		col := "a:" + f.Name
		switch f.Name {
		case "position":
			col = "vertices"
			if _, ok := f.Type.(*arrow.FixedSizeListType); !ok {
				t.Fatalf("position is %s, want a FixedSizeList", f.Type)
			}
		case "object_id":
			col = "ids"
			if f.Type.ID() != arrow.INT64 {
				t.Fatalf("object_id is %s, want int64", f.Type)
			}
		}
		p.addRows(col, s.column(t, f.Name)...)
	}
	if n := s.batches[len(s.batches)-1].NumRows(); n != 0 {
		t.Fatalf("the last record batch has %d rows, want the closing batch of none", n)
	}
	p.count, _ = strconv.ParseInt(s.last["zvf:count"], 10, 64)
	if p.count != int64(s.rows) {
		t.Fatalf("zvf:count %q, %d rows", s.last["zvf:count"], s.rows)
	}
	p.next = s.last["zvf:next"]
	if v, ok := s.last["zvf:number_matched"]; ok {
		p.numberMatched, _ = strconv.ParseInt(v, 10, 64)
	}
	return p
}

// arrowIndices reads an edges or faces table: its rows as index tuples.
func arrowIndices(t testing.TB, body []byte, width int) (rows [][]int64, md map[string]string) {
	t.Helper()
	s := readArrow(t, body)
	fs := s.schema.Fields()
	if len(fs) != width {
		t.Fatalf("%d index columns, want %d", len(fs), width)
	}
	for k, f := range fs {
		if f.Name != "v"+strconv.Itoa(k) || f.Type.ID() != arrow.UINT32 {
			t.Fatalf("column %d is %s %s, want v%d uint32", k, f.Name, f.Type, k)
		}
	}
	for _, rec := range s.batches {
		for i := 0; i < int(rec.NumRows()); i++ {
			row := make([]int64, width)
			for k := range row {
				row[k] = int64(rec.Column(k).(*array.Uint32).Value(i))
			}
			rows = append(rows, row)
		}
	}
	return rows, s.last
}

func serveOK(t testing.TB, h http.Handler, path string) (http.Header, []byte) {
	t.Helper()
	code, hdr, body := serveFull(t.(*testing.T), h, path)
	if code != http.StatusOK {
		t.Fatalf("%s: %d %.300s", path, code, body)
	}
	return hdr, body
}

// TestArrowPagesMatchJSON: for every demo store, level and two boxes,
// unpaged and paged (limit=997, --max-vertices), each Arrow page holds the
// JSON page's rows, object ids and attributes value for value, its
// closing batch the same count, next cursor (also X-Next-Cursor) and
// number_matched, and table=edges or table=faces with the same cursor the
// page's connectivity: the same global indices.
func TestArrowPagesMatchJSON(t *testing.T) {
	t.Parallel()
	eachPagingStore(t, func(t *testing.T, s *zvf.Store, whole, capped http.Handler) {
		geom := s.Info().GeometryTypes[0]
		table := map[string]string{"mesh": "faces", "point_cloud": ""}[geom]
		if _, ok := map[string]bool{"mesh": true, "point_cloud": true}[geom]; !ok {
			table = "edges"
		}
		for _, n := range s.Levels() {
			for bi, box := range pagingBoxes {
				for _, c := range []struct {
					name  string
					h     http.Handler
					limit string
				}{{"unpaged", whole, ""}, {"limit 997", whole, "&limit=997"}, {"--max-vertices", capped, ""}} {
					path := fmt.Sprintf("/api/v1/stores/%s/bbox?%s&level=%d&attributes=*%s", s.Name(), box, n, c.limit)
					jsonPages := fetchPages(t, c.h, path, "json")
					cur := ""
					for i, want := range jsonPages {
						what := fmt.Sprintf("level %d box %d %s page %d", n, bi, c.name, i)
						u := path + "&f=arrow"
						if cur != "" {
							u += "&cursor=" + url.QueryEscape(cur)
						}
						hdr, body := serveOK(t, c.h, u)
						if ct := hdr.Get("Content-Type"); ct != "application/vnd.apache.arrow.stream" {
							t.Fatalf("%s: Content-Type %q", what, ct)
						}
						got := arrowPage(t, body)
						if got.next != want.next || hdr.Get("X-Next-Cursor") != want.next {
							t.Fatalf("%s: zvf:next %q, X-Next-Cursor %q, JSON next %q", what, got.next, hdr.Get("X-Next-Cursor"), want.next)
						}
						if got.count != want.count || got.numberMatched != want.numberMatched {
							t.Fatalf("%s: count %d number_matched %d, JSON %d %d", what, got.count, got.numberMatched, want.count, want.numberMatched)
						}
						want.edges, want.faces, want.width = nil, nil, 0
						sameJoined(t, what, got, want)
						if table != "" {
							_, body := serveOK(t, c.h, strings.Replace(u, "&f=arrow", "&f=arrow&table="+table, 1))
							j := jsonPages[i]
							wantIdx, width := j.edges, 2
							if table == "faces" {
								wantIdx, width = j.faces, max(j.width, 3)
							}
							idx, md := arrowIndices(t, body, width)
							if !slices.EqualFunc(idx, wantIdx, slices.Equal) {
								t.Fatalf("%s: table=%s has %d rows, JSON %d (or they differ)", what, table, len(idx), len(wantIdx))
							}
							if md["zvf:next"] != want.next || md["zvf:"+table] != strconv.Itoa(len(wantIdx)) {
								t.Fatalf("%s: table=%s closes with %v", what, table, md)
							}
						}
						cur = got.next
					}
					if bi == 0 && n == 0 && c.name == "unpaged" && table != "" && len(jsonPages[0].edges)+len(jsonPages[0].faces) < 100 {
						t.Fatalf("%s: too little connectivity to test", s.Name())
					}
				}
			}
		}
	})
}

// TestArrowObjectAndChunkMatchJSON: the object and chunk routes in Arrow
// hold the JSON answer's rows and attributes, the object's edges or
// faces as its tables, and their trailers' fields as the closing batch's
// zvf: metadata (JSON values).
func TestArrowObjectAndChunkMatchJSON(t *testing.T) {
	t.Parallel()
	stores, srv := pagingServer(t, 1<<40)
	h := srv.Handler()
	for _, s := range stores {
		t.Run(s.Name(), func(t *testing.T) {
			t.Parallel()
			geom := s.Info().GeometryTypes[0]
			for _, n := range s.Levels() {
				// Objects: the first, a middle and the last id of the
				// whole box's answer.
				_, body := serveOK(t, h, fmt.Sprintf("/api/v1/stores/%s/bbox?min=-1,-1,-1&max=1001,1001,601&level=%d&f=json&connectivity=false", s.Name(), n))
				var box struct {
					ObjectIDs []int64 `json:"object_ids"`
				}
				if err := json.Unmarshal(body, &box); err != nil || len(box.ObjectIDs) == 0 {
					t.Fatalf("level %d: %v, %d object ids", n, err, len(box.ObjectIDs))
				}
				for _, id := range []int64{box.ObjectIDs[0], box.ObjectIDs[len(box.ObjectIDs)/2], box.ObjectIDs[len(box.ObjectIDs)-1]} {
					path := fmt.Sprintf("/api/v1/stores/%s/objects/%d?level=%d&attributes=*", s.Name(), id, n)
					what := fmt.Sprintf("level %d object %d", n, id)
					compareArrowToJSON(t, h, what, path, geom)
				}
				// Chunks: the first and the last.
				_, body = serveOK(t, h, fmt.Sprintf("/api/v1/stores/%s/levels/%d/chunks", s.Name(), n))
				var chunks struct {
					Chunks []string `json:"chunks"`
				}
				if err := json.Unmarshal(body, &chunks); err != nil || len(chunks.Chunks) == 0 {
					t.Fatalf("level %d: %v, %d chunks", n, err, len(chunks.Chunks))
				}
				for _, k := range []string{chunks.Chunks[0], chunks.Chunks[len(chunks.Chunks)-1]} {
					path := fmt.Sprintf("/api/v1/stores/%s/levels/%d/chunks/%s?attributes=*", s.Name(), n, k)
					compareArrowToJSON(t, h, fmt.Sprintf("level %d chunk %s", n, k), path, "")
				}
			}
		})
	}
}

// compareArrowToJSON holds path's f=arrow answer (and for an object its
// table=edges|faces) equal to its f=json answer.
func compareArrowToJSON(t *testing.T, h http.Handler, what, path, geom string) {
	t.Helper()
	_, jbody := serveOK(t, h, path+"&f=json")
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(jbody, &doc); err != nil {
		t.Fatal(err)
	}
	want := parsePage(t, "json", jbody)
	if len(want.cols["ids"]) == 0 {
		delete(want.cols, "ids") // object and chunk answers have no object_ids member
	}
	_, abody := serveOK(t, h, path+"&f=arrow")
	got := arrowPage(t, abody)
	want.edges, want.faces, want.width = nil, nil, 0
	want.numberMatched = got.numberMatched
	sameJoined(t, what, got, want)
	md := readArrow(t, abody).last
	for k, v := range doc {
		switch k {
		case "vertices", "object_ids", "attributes", "edges", "faces", "next", "kind", "store", "level", "dims", "vertex_dtype", "attribute_info", "has_object_ids":
			continue
		}
		if !jsonEqual(t, md["zvf:"+k], v) {
			t.Fatalf("%s: zvf:%s is %s, JSON %s", what, k, md["zvf:"+k], v)
		}
	}
	for _, table := range []string{"edges", "faces"} {
		if (table == "faces") != (geom == "mesh") || geom == "" || geom == "point_cloud" {
			continue
		}
		var wantIdx [][]int64
		if raw, ok := doc[table]; ok {
			if err := json.Unmarshal(raw, &wantIdx); err != nil {
				t.Fatal(err)
			}
		}
		width := 2
		if table == "faces" {
			width = 3
			if len(wantIdx) > 0 {
				width = len(wantIdx[0])
			}
		}
		_, body := serveOK(t, h, path+"&f=arrow&table="+table)
		idx, _ := arrowIndices(t, body, width)
		if len(idx) == 0 && len(wantIdx) == 0 {
			continue
		}
		if !slices.EqualFunc(idx, wantIdx, slices.Equal) {
			t.Fatalf("%s: table=%s has %d rows, JSON %d (or they differ)", what, table, len(idx), len(wantIdx))
		}
	}
}

func jsonEqual(t testing.TB, a string, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// TestArrowCategoricalIsDictionary: a categorical attribute is a
// Dictionary<int32, utf8> of the store's labels, every row's label the
// JSON answer's.
func TestArrowCategoricalIsDictionary(t *testing.T) {
	t.Parallel()
	stores, err := pagingStores()
	if err != nil {
		t.Fatal(err)
	}
	srv := apitest.New(t, api.Options{Stores: stores})
	_, desc := serveOK(t, srv.Handler(), "/api/v1/stores/cells")
	var d struct {
		Levels []zvf.LevelInfo `json:"levels"`
	}
	if err := json.Unmarshal(desc, &d); err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, a := range d.Levels[0].VertexAttributes {
		if a.Name == "cell_type" {
			labels = a.Categories
		}
	}
	if len(labels) < 2 {
		t.Fatalf("cell_type labels %v", labels)
	}
	_, body := serveOK(t, srv.Handler(), "/api/v1/stores/cells/bbox?min=0,0,0&max=500,500,300&attributes=cell_type&f=arrow")
	s := readArrow(t, body)
	f, _ := s.schema.FieldsByName("cell_type")
	dt, ok := f[0].Type.(*arrow.DictionaryType)
	if !ok || dt.IndexType.ID() != arrow.INT32 || dt.ValueType.ID() != arrow.STRING {
		t.Fatalf("cell_type is %s, want dictionary<values=utf8, indices=int32>", f[0].Type)
	}
	seen := map[string]bool{}
	for _, rec := range s.batches {
		dict := rec.Column(s.schema.FieldIndices("cell_type")[0]).(*array.Dictionary)
		got := dict.Dictionary().(*array.String)
		var vs []string
		for i := 0; i < got.Len(); i++ {
			vs = append(vs, got.Value(i))
		}
		if !slices.Equal(vs, labels) {
			t.Fatalf("dictionary %v, the store's labels %v", vs, labels)
		}
		for i := 0; i < dict.Len(); i++ {
			seen[labels[dict.GetValueIndex(i)]] = true
		}
	}
	if len(seen) < 2 {
		t.Fatalf("labels seen %v: too few to test", seen)
	}
}

// TestArrowStreamsAsChunksAreRead: a 60,000-point box comes as a record
// batch per chunk read (512 of them), written as each is read: the first
// batches reach the client while the last chunk's read still hangs.
func TestArrowStreamsAsChunksAreRead(t *testing.T) {
	t.Parallel()
	_, _, _, url, client := streamServer(t, api.Options{}, false,
		&faultstore.Rule{Op: "get", Key: "vertices/7.7.7/c/0", Fault: faultstore.Fault{Hang: true}})
	// An answer held back until its end would never come: 10 s fails.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+wholeBox+"&f=arrow", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := ipc.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !rd.Next() || rd.RecordBatch().NumRows() == 0 {
		t.Fatalf("no first batch while the last chunk hangs: %v", rd.Err())
	}
	rd.Release()
	resp.Body.Close() // the server's request ends the hang

	_, _, _, url, client = streamServer(t, api.Options{}, false)
	resp, body, err := fetch(t, client, url+wholeBox+"&f=arrow")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %v", resp.StatusCode, err)
	}
	s := readArrow(t, body)
	if s.rows != streamPoints || len(s.batches) < 512 {
		t.Fatalf("%d rows in %d batches, want %d rows in a batch per chunk", s.rows, len(s.batches), streamPoints)
	}
}
