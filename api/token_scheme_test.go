package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
)

// TestBearerSchemeIsCaseInsensitive: the authentication scheme is case-
// insensitive (RFC 9110 11.1) and may be followed by more than one space
// (11.6.2: 1*SP), so "bearer TOKEN" is the token; the token itself is
// compared exactly. A wrong token is told apart from a missing one in the
// 401's detail and in WWW-Authenticate (RFC 6750 3.1: invalid_token).
// Before, only the exact bytes "Bearer TOKEN" passed.
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{Token: "s3cret", Stores: openStores(t, "graph")})
	for _, tc := range []struct {
		auth   string
		status int
		detail string // for a 401
	}{
		{"Bearer s3cret", http.StatusOK, ""},
		{"bearer s3cret", 200, ""},
		{"BEARER s3cret", 200, ""},
		{"Bearer  s3cret", 200, ""},
		{"Bearer S3CRET", 401, "not valid"},
		{"Bearer s3cret2", 401, "not valid"},
		{"Basic s3cret", 401, "needs a bearer token"},
		{"s3cret", 401, "needs a bearer token"},
		{"", 401, "needs a bearer token"},
	} {
		var hdr []string
		if tc.auth != "" {
			hdr = []string{"Authorization", tc.auth}
		}
		resp, body := apitest.Get(t, ts, "/api/v1/stores", hdr...)
		if resp.StatusCode != tc.status {
			t.Errorf("%q: %d %s, want %d", tc.auth, resp.StatusCode, body, tc.status)
			continue
		}
		if tc.status != 401 {
			continue
		}
		var p api.Problem
		if json.Unmarshal(body, &p) != nil || p.Status != 401 || !strings.HasSuffix(p.Type, "/unauthorized") || !strings.Contains(p.Detail, tc.detail) {
			t.Errorf("%q: %s, want an unauthorized problem saying %q", tc.auth, body, tc.detail)
		}
		wa := resp.Header.Get("WWW-Authenticate")
		if !strings.HasPrefix(wa, "Bearer ") || strings.Contains(wa, "invalid_token") != (tc.detail == "not valid") {
			t.Errorf("%q: WWW-Authenticate %q", tc.auth, wa)
		}
	}
}
