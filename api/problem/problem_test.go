package problem_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve"
	"github.com/zvfserve/zvfserve/api/problem"
)

// TestWrite: every kind is written as problem+json with its own type URI,
// title and status (a cancelled request's 499 goes out as 408), the data
// answer's validators are dropped, and Retry-After is sent when set.
func TestWrite(t *testing.T) {
	t.Parallel()
	for _, k := range problem.Kinds() {
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			d := problem.Newf(k, "detail %d", 7)
			d.RetryAfter = 3
			rec := httptest.NewRecorder()
			rec.Header().Set("ETag", `"x"`)
			rec.Header().Set("Cache-Control", "public, max-age=60")
			problem.Write(rec, httptest.NewRequest(http.MethodGet, "/a/b?c=d", nil), d)
			want := k.Status()
			if want == problem.StatusClientClosed {
				want = http.StatusRequestTimeout
			}
			if rec.Code != want {
				t.Errorf("status %d, want %d", rec.Code, want)
			}
			h := rec.Header()
			if h.Get("Content-Type") != "application/problem+json" || h.Get("ETag") != "" || h.Get("Cache-Control") != "no-store" ||
				h.Get("Retry-After") != "3" {
				t.Errorf("headers %v", h)
			}
			var got problem.Details
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if got.Type != problem.TypeBase+string(k) || got.Title != k.Title() || got.Title == "" || got.Status != want ||
				got.Detail != "detail 7" || got.Instance != "/a/b" {
				t.Errorf("body %+v", got)
			}
			if got.Kind() != k {
				t.Errorf("Kind() = %q", got.Kind())
			}
		})
	}
}

// TestKindsDocumented: openapi.yaml names every kind clients can meet.
func TestKindsDocumented(t *testing.T) {
	t.Parallel()
	spec := string(zvfserve.OpenAPI())
	for _, k := range problem.Kinds() {
		if !strings.Contains(spec, "`"+string(k)+"`") {
			t.Errorf("openapi.yaml does not name the problem kind %q", k)
		}
	}
}
