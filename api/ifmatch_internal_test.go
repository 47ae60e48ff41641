package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestIfMatchIsJudgedPerAttempt: an answer retried on the store's new
// version (wrap) asks notModified again with the new version's ETag, and
// that judgement is the one that stands: an If-Match naming the new
// version's tag gets the new answer, not the 412 its first attempt, on
// the old version, was headed for.
func TestIfMatchIsJudgedPerAttempt(t *testing.T) {
	t.Parallel()
	s := &Server{}
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/api/v1/stores/x", nil)
	r.Header.Set("If-Match", `"new"`)
	var sw statusWriter
	var rc http.ResponseController
	sw.init(rec, &rc, r, time.Second, false)
	if s.notModified(&sw, r, `"old"`) {
		t.Fatal("the first attempt was answered")
	}
	// The first attempt met the change before its answer started; wrap
	// runs the handler again on the new version.
	if s.notModified(&sw, r, `"new"`) {
		t.Fatal("the second attempt was answered")
	}
	sw.WriteHeader(http.StatusOK)
	if _, err := sw.Write([]byte("new answer")); err != nil || rec.Code != http.StatusOK || rec.Body.String() != "new answer" {
		t.Fatalf("%d %q, %v; want the new version's answer", rec.Code, rec.Body.String(), err)
	}
}
