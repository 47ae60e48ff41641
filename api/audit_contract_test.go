package api_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
)

// TestAutoLevelETagFollowsTheAnswer: level=auto chooses from estimates
// that get exact as chunks are read, so one URL can be answered from one
// level cold and another warm. A strong ETag names one body: the two
// answers must not share it, and a client revalidating the first (an
// empty level-1 answer here) must get the second, not a 304.
func TestAutoLevelETagFollowsTheAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ store, box, limit string }{
		// Level 0 holds 47 rows, level 1 none: cold, the estimate of
		// level 0 is over 100 and auto answers level 1.
		{"points_pyramid", "min=100,100,100&max=300,400,300", "100"},
	} {
		t.Run(tc.store, func(t *testing.T) {
			s := apitest.Open(t, filepath.Join(fixtures, tc.store+".zarrvectors"), tc.store, cache.New(64<<20))
			h := apitest.New(t, api.Options{Stores: []*zvf.Store{s}}).Handler()
			auto := "/api/v1/stores/" + tc.store + "/bbox?" + tc.box + "&level=auto&limit=" + tc.limit
			for _, f := range []string{"", "&f=bin"} {
				_, h1, b1 := diffGet(t, h, auto+f)
				// Reading level 0 in the box makes its count exact.
				if code, _, b := diffGet(t, h, "/api/v1/stores/"+tc.store+"/bbox?"+tc.box+"&level=0"+f); code != 200 {
					t.Fatalf("level 0: %d %s", code, b)
				}
				_, h2, b2 := diffGet(t, h, auto+f)
				if bytes.Equal(b1, b2) {
					if h1.Get("ETag") != h2.Get("ETag") {
						t.Errorf("%s: same body, ETags %s and %s", f, h1.Get("ETag"), h2.Get("ETag"))
					}
					continue
				}
				if h1.Get("ETag") == h2.Get("ETag") {
					t.Errorf("%s: one ETag %s for two bodies:\n%.200q\n%.200q", f, h1.Get("ETag"), b1, b2)
				}
				rec := httptest.NewRecorder()
				req := httptest.NewRequest(http.MethodGet, auto+f, nil)
				req.Header.Set("If-None-Match", h1.Get("ETag"))
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK || !bytes.Equal(rec.Body.Bytes(), b2) {
					t.Errorf("%s: revalidating the cold answer: %d %.200q, want 200 and the warm answer", f, rec.Code, rec.Body.Bytes())
				}
			}
		})
	}
}
