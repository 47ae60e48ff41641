package api_test

import (
	"context"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// TestSWCTypeIsAWholeNumber: SWC's type column is an integer to its
// readers (NeuroM, navis and the SWC+ checker parse it as one). A float
// type attribute holding whole numbers is written as them; one holding
// 2.5 or NaN is not written at all (0, undefined, with a header line
// saying why and where), where before "2.5" and "nan" went into the
// column and the file failed its readers.
func TestSWCTypeIsAWholeNumber(t *testing.T) {
	t.Parallel()
	nan := float32(0)
	nan /= nan
	for _, tc := range []struct {
		name  string
		types []float32
		want  []string // the type column, node by node
		note  string   // a header line that must be there
	}{
		{"whole", []float32{1, 3, 4}, []string{"1", "3", "4"}, "# type: the type attribute"},
		{"half", []float32{1, 2.5, 4}, []string{"0", "0", "0"}, "# type: the type attribute is not a whole number at row 1 (2.5); written as 0 (undefined)"},
		{"nan", []float32{nan, 2, 4}, []string{"0", "0", "0"}, "# type: the type attribute is not a whole number at row 0 (nan); written as 0 (undefined)"},
		{"huge", []float32{1, 2, 1e30}, []string{"0", "0", "0"}, "at row 2 (1e+30)"},
	} {
		g := &writer.Graph{Positions: []float32{1, 1, 1, 2, 2, 2, 3, 3, 3}, Edges: []int64{1, 0, 2, 1}}
		g.Attributes = []writer.Attribute{writer.Float32Attribute("type", 1, tc.types)}
		h := writtenStore(t, "g", func(ctx context.Context, w storage.Writer, prefix string) error {
			_, err := writer.WriteGraph(ctx, w, prefix, g, writer.Options{ChunkShape: []float64{50, 50, 50}})
			return err
		})
		code, _, body := serve(t, h, "/api/v1/stores/g/objects/0?f=swc")
		if code != 200 {
			t.Fatalf("%s: %d %s", tc.name, code, body)
		}
		if !strings.Contains(string(body), tc.note) {
			t.Errorf("%s: no %q in\n%s", tc.name, tc.note, body)
		}
		nodes := parseSWC(t, body)
		if len(nodes) != len(tc.want) {
			t.Fatalf("%s: %d nodes\n%s", tc.name, len(nodes), body)
		}
		for i, nd := range nodes {
			if nd.typ != tc.want[nd.n-1] {
				t.Errorf("%s: node %d (line %d) type %q, want %q", tc.name, nd.n, i, nd.typ, tc.want[nd.n-1])
			}
		}
	}
}
