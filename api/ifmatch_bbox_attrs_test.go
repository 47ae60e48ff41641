package api_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
)

// TestIfMatchBBoxUnknownAttributeIs404: a box query naming an attribute
// or link attribute the level lacks is a 404 saying which; with an
// If-Match naming another version it was a 412, the query's mistake
// hidden behind a precondition the answer could never have met (RFC 9110
// 13.2.1: a response that would not be 2xx ignores preconditions). Now
// it is the 404 with or without If-Match, GET and HEAD, and a valid box
// is still refused 412.
func TestIfMatchBBoxUnknownAttributeIs404(t *testing.T) {
	t.Parallel()
	srv, _ := newServer(t, api.Options{})
	const other = `"0123456789abcdef01234567"`
	const box = "/api/v1/stores/graph/bbox?min=0,0,0&max=1,1,1"
	for _, tc := range []struct{ query, says string }{
		{"&attributes=nosuch", "nosuch"},
		{"&attributes=nosuch&f=arrow", "nosuch"},
		{"&edge_attributes=nosuch", "nosuch"},
		{"&edge_attributes=nosuch&f=ply", "nosuch"},
		{"&edge_attributes=nosuch&f=bin", "nosuch"},
	} {
		for _, method := range []string{"GET", "HEAD"} {
			for _, im := range []string{"", other} {
				req := httptest.NewRequest(method, box+tc.query, nil)
				if im != "" {
					req.Header.Set("If-Match", im)
				}
				code, _, body := serveRequest(t, srv.Handler(), req)
				if code != 404 || method == "GET" && !strings.Contains(string(body), tc.says) {
					t.Errorf("%s %s, If-Match %q: %d %.300s; want the 404 naming %s", method, tc.query, im, code, body, tc.says)
				}
			}
		}
	}
	req := httptest.NewRequest("GET", box, nil)
	req.Header.Set("If-Match", other)
	if code, _, body := serveRequest(t, srv.Handler(), req); code != 412 || !strings.Contains(string(body), "precondition-failed") {
		t.Errorf("a valid box, If-Match %s: %d %.300s; want 412", other, code, body)
	}
}
