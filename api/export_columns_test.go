package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// TestExportColumnsNeverRepeat: a CSV or PLY header that would name two
// columns alike (an attribute named like an axis or object_id, or like
// another attribute's channel) is refused with a 422 that names the
// column. CSV wrote "x,y,z,x" and "a_0,a_1,a_0": Python's csv.DictReader
// then gives the attribute's value for row["x"], silently. Arrow keeps
// such names (docs/arrow.md: its readers address fields by position, and
// pyarrow refuses an ambiguous name instead of guessing).
func TestExportColumnsNeverRepeat(t *testing.T) {
	t.Parallel()
	p := &writer.PointCloud{Positions: []float32{1, 1, 1, 2, 2, 2, 3, 3, 3}}
	for _, n := range []string{"x", "position", "geometry", "a", "a_0", "xyz"} {
		ch := 1
		if n == "a" {
			ch = 2
		}
		p.Attributes = append(p.Attributes, writer.Float32Attribute(n, ch, make([]float32, 3*ch)))
	}
	h := writtenStore(t, "p", func(ctx context.Context, w storage.Writer, prefix string) error {
		_, err := writer.WritePoints(ctx, w, prefix, p, writer.Options{ChunkShape: []float64{50, 50, 50}})
		return err
	})
	for _, tc := range []struct {
		f, attrs, repeated string // repeated: "" when the file is fine
	}{
		{"csv", "x", "x"},
		{"csv", "a,a_0", "a_0"},
		{"csv", "position,geometry,xyz", ""},
		{"ply", "x", "x"},
		{"ply", "a,a_0", "a_0"},
		{"ply", "position,xyz", ""},
	} {
		code, hdr, body := serveFull(t, h, "/api/v1/stores/p/bbox?min=0,0,0&max=9,9,9&attributes="+tc.attrs+"&f="+tc.f)
		if tc.repeated == "" {
			if code != 200 {
				t.Errorf("f=%s attributes=%s: %d %.300s", tc.f, tc.attrs, code, body)
			}
			continue
		}
		var pr struct {
			Type, Detail string
		}
		if code != 422 || json.Unmarshal(body, &pr) != nil || !strings.HasSuffix(pr.Type, "/unrepresentable") ||
			!strings.Contains(pr.Detail, `"`+tc.repeated+`"`) || hdr.Get("Content-Disposition") != "" {
			t.Errorf("f=%s attributes=%s: %d %q %.300s, want 422 unrepresentable naming %q", tc.f, tc.attrs, code, hdr.Get("Content-Disposition"), body, tc.repeated)
		}
	}
}
