package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// TestCategoricalChannelsInJSON: a categorical attribute of two channels
// (attribute_info says channels 2) is a pair of labels a row in JSON and
// NDJSON, as CSV (pair_0, pair_1) and Arrow (FixedSizeList of the
// dictionary) have it. JSON wrote one label a row, and not even the row's
// first: the label of element row of the codes (rows 0, 1, 2 took codes
// 0, 1, 2 of the first row and a half), so the answer was wrong data
// under a header that promised two channels.
func TestCategoricalChannelsInJSON(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	mem, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	p := &writer.PointCloud{Positions: []float32{1, 1, 1, 2, 2, 2, 3, 3, 3}}
	p.Attributes = []writer.Attribute{{Name: "pair", DType: "uint8", Channels: 2, Data: []byte{0, 1, 1, 2, 2, 0}, Categories: []string{"a", "b", "c"}}}
	if _, err := writer.WritePoints(ctx, mem, "p", p, writer.Options{ChunkShape: []float64{50, 50, 50}}); err != nil {
		t.Fatal(err)
	}
	s, err := zvf.Open(ctx, storage.Sub(mem, "p"), zvf.Options{Name: "p", Cache: cache.New(1 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	h := apitest.New(t, api.Options{Stores: []*zvf.Store{s}}).Handler()
	want := [][]string{{"a", "b"}, {"b", "c"}, {"c", "a"}}
	const box = "/api/v1/stores/p/bbox?min=0,0,0&max=9,9,9&attributes=pair"
	for range 2 { // the second time from the chunk's prepared text
		code, _, body := serve(t, h, box+"&f=json")
		var a struct {
			Attributes map[string][][]string `json:"attributes"`
		}
		if code != 200 || json.Unmarshal(body, &a) != nil || !reflect.DeepEqual(a.Attributes["pair"], want) {
			t.Errorf("JSON: %d %s, want pair %v", code, body, want)
		}
		code, _, body = serve(t, h, box+"&f=ndjson")
		var got [][]string
		sc := bufio.NewScanner(bytes.NewReader(body))
		for sc.Scan() {
			var line struct {
				A map[string][]string `json:"a"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.A != nil {
				got = append(got, line.A["pair"])
			}
		}
		if code != 200 || !reflect.DeepEqual(got, want) {
			t.Errorf("NDJSON: %d %s, want pair %v", code, body, want)
		}
	}
}
