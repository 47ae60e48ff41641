package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/storage"
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
	p := &writer.PointCloud{Positions: []float32{1, 1, 1, 2, 2, 2, 3, 3, 3}}
	p.Attributes = []writer.Attribute{{Name: "pair", DType: "uint8", Channels: 2, Data: []byte{0, 1, 1, 2, 2, 0}, Categories: []string{"a", "b", "c"}}}
	h := writtenStore(t, "p", func(ctx context.Context, w storage.Writer, prefix string) error {
		_, err := writer.WritePoints(ctx, w, prefix, p, writer.Options{ChunkShape: []float64{50, 50, 50}})
		return err
	})
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
