package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
)

// TestAcceptQZeroAndCase: a media type given q=0 in Accept is never sent
// (RFC 9110 12.4.2), the most specific range naming a type decides its
// q (12.5.1), and media types match whatever their case (8.3.1). Before,
// Accept was read by goautoneg, which only sorts by q: application/json;q=0
// and */*;q=0 were answered in JSON with 200, application/json;q=0,
// */*;q=0.1 in JSON too, and APPLICATION/JSON was a 406.
func TestAcceptQZeroAndCase(t *testing.T) {
	t.Parallel()
	srv := demoServer(t, api.Options{})
	h := srv.Handler()
	const box = "/api/v1/stores/cells/bbox?min=0,0,0&max=100,100,100"
	for _, tc := range []struct {
		accept string
		status int
		ctype  string // "" for any but JSON
	}{
		{"application/json;q=0", 406, "application/problem+json"},
		{"application/json; q=0.0", 406, "application/problem+json"},
		{"application/json;Q=0", 406, "application/problem+json"},
		{"*/*;q=0", 406, "application/problem+json"},
		{"application/*;q=0", 406, "application/problem+json"},
		{"application/json;q=0, */*;q=0.1", 200, ""},
		{"application/json;q=0, application/*", 200, ""},
		{"*/*, application/json;q=0", 200, ""},
		{"APPLICATION/JSON", 200, "application/json"},
		{"Application/X-NDJSON", 200, "application/x-ndjson"},
		{"application/x-ndjson;q=0.1, */*;q=0.5", 200, "application/json"},
		{"application/json;q=0.5, */*;q=0.9", 200, ""},
	} {
		resp := do(t, h, http.MethodGet, box, "Accept", tc.accept)
		body, _ := io.ReadAll(resp.Body)
		ct := resp.Header.Get("Content-Type")
		ok := resp.StatusCode == tc.status && (ct == tc.ctype || tc.ctype == "" && ct != "application/json" && ct != "application/problem+json")
		if ok && tc.status == 406 {
			var p api.Problem
			ok = json.Unmarshal(body, &p) == nil && p.Status == 406 && strings.HasSuffix(p.Type, "/not-acceptable") &&
				strings.Contains(p.Detail, tc.accept)
		}
		if !ok {
			want := tc.ctype
			if want == "" {
				want = "a type other than JSON"
			}
			t.Errorf("Accept %q: %d %q %.200s; want %d %s", tc.accept, resp.StatusCode, ct, body, tc.status, want)
		}
	}
}
