package problem_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

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

// TestWriteClipsTheInstance: a path too long to serve (the 414 for one
// over 1 KiB) was echoed whole as the instance, up to the 64 KiB a
// request's header may hold: the answer to a refused path was as large as
// the path. The instance keeps its first bytes, at a character boundary,
// marked as cut.
func TestWriteClipsTheInstance(t *testing.T) {
	t.Parallel()
	long := "/api/v1/stores/" + strings.Repeat("é", 30_000)
	r := httptest.NewRequest(http.MethodGet, "/x", nil)
	r.URL.Path = long
	rec := httptest.NewRecorder()
	problem.Write(rec, r, problem.New(problem.URITooLong, "path too long"))
	var got problem.Details
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if rec.Body.Len() > 2048 || !strings.HasPrefix(got.Instance, "/api/v1/stores/é") || !strings.HasSuffix(got.Instance, "…") || !utf8.ValidString(got.Instance) {
		t.Errorf("%d bytes, instance %.80q…", rec.Body.Len(), got.Instance)
	}
}
