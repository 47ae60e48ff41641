package api_test

import (
	"context"
	"encoding/json"
	"net/url"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// TestFilterBoolIsZeroOrOne: a bool attribute is 0 or 1 to a filter
// (docs/filters.md), as the answers print it: a byte other than 0 is
// true. Bytes 2 and 255, which every format shows as true, were compared
// as 2 and 255: b = 1 left them out of an answer that printed them true,
// and b = 2 found a row printed true.
func TestFilterBoolIsZeroOrOne(t *testing.T) {
	t.Parallel()
	p := &writer.PointCloud{Positions: []float32{1, 1, 1, 2, 2, 2, 3, 3, 3, 5, 5, 5}}
	p.Attributes = []writer.Attribute{{Name: "b", DType: "bool", Channels: 1, Data: []byte{0, 1, 2, 255}}}
	h := writtenStore(t, "p", func(ctx context.Context, w storage.Writer, prefix string) error {
		_, err := writer.WritePoints(ctx, w, prefix, p, writer.Options{ChunkShape: []float64{4, 4, 4}})
		return err
	})
	const box = "min=0,0,0&max=9,9,9"
	code, _, body := serve(t, h, "/api/v1/stores/p/bbox?"+box+"&attributes=b")
	var a struct {
		Attributes struct{ B []bool } `json:"attributes"`
	}
	if code != 200 || json.Unmarshal(body, &a) != nil || len(a.Attributes.B) != 4 || a.Attributes.B[0] || !a.Attributes.B[1] || !a.Attributes.B[2] || !a.Attributes.B[3] {
		t.Fatalf("answer %d %s: want b false, true, true, true", code, body)
	}
	for f, want := range map[string]int{"b = 1": 3, "b = 0": 1, "b <> 0": 3, "b > 0": 3, "b = 2": 0, "b = 255": 0, "b >= 2": 0, "b IN (1, 2)": 3, "b BETWEEN 1 AND 300": 3, "NOT b = 1": 1} {
		for _, route := range []string{"count?", "density?shape=1,1,1&"} {
			code, _, body := serve(t, h, "/api/v1/stores/p/"+route+box+"&filter="+url.QueryEscape(f))
			var c struct {
				Count  int
				Counts []int
			}
			if code != 200 || json.Unmarshal(body, &c) != nil {
				t.Fatalf("%s%s: %d %s", route, f, code, body)
			}
			if len(c.Counts) == 1 {
				c.Count = c.Counts[0]
			}
			if c.Count != want {
				t.Errorf("%s%s: %d, want %d", route, f, c.Count, want)
			}
		}
	}
}
