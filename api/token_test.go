package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/web"
)

// TestTokenResponsesArePrivate: with a token, what an authorized client
// receives must not be stored by shared caches (a CDN or proxy would
// otherwise hand it to clients without the token), so every guarded
// response is private and varies on Authorization — revalidations too.
// Without a token, data stays publicly cacheable.
func TestTokenResponsesArePrivate(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{Token: "s3cret", MaxAge: time.Hour, UI: web.Handler(web.Options{})})
	_, open := newServer(t, api.Options{MaxAge: time.Hour})
	auth := []string{"Authorization", "Bearer s3cret"}
	for _, tc := range []struct{ name, path string }{
		{"catalog", "/api/v1/stores"},
		{"descriptor", "/api/v1/stores/graph"},
		{"bbox json", graphBox},
		{"bbox binary", graphBox + "&f=bin"},
		{"object", "/api/v1/stores/skeleton/objects/1"},
		{"manifest", "/api/v1/stores/points_pyramid/objects/0/manifest?level=1"},
		{"chunk list", "/api/v1/stores/graph/levels/0/chunks"},
		{"chunk", "/api/v1/stores/graph/levels/0/chunks/3.4.2"},
		{"openapi", "/openapi.yaml"},
		{"metrics", "/metrics"},
		{"viewer", "/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, _ := apitest.Get(t, ts, tc.path, auth...)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			checkPrivate(t, resp)
			if etag := resp.Header.Get("ETag"); etag != "" {
				resp, _ = apitest.Get(t, ts, tc.path, append(auth, "If-None-Match", etag)...)
				if resp.StatusCode != http.StatusNotModified {
					t.Fatalf("revalidation: %d", resp.StatusCode)
				}
				checkPrivate(t, resp)
			}
		})
	}
	resp, _ := apitest.Get(t, open, graphBox)
	if cc := resp.Header.Get("Cache-Control"); cc != "public, max-age=3600" {
		t.Errorf("without a token: Cache-Control %q, want public", cc)
	}
}

func checkPrivate(t *testing.T, resp *http.Response) {
	t.Helper()
	cc := resp.Header.Get("Cache-Control")
	if !strings.Contains(cc, "private") || strings.Contains(cc, "public") {
		t.Errorf("Cache-Control %q: want private", cc)
	}
	if !strings.Contains(strings.Join(resp.Header.Values("Vary"), ","), "Authorization") {
		t.Errorf("Vary %q lacks Authorization", resp.Header.Values("Vary"))
	}
}

// TestAdminCmdlineHidesSecrets: /debug/pprof/cmdline prints the process's
// arguments; the token (however it was passed) and the query strings of
// store URLs (which may carry credentials) are redacted.
func TestAdminCmdlineHidesSecrets(t *testing.T) {
	saved := os.Args
	t.Cleanup(func() { os.Args = saved })
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"token flag", []string{"zvfserve", "serve", "--token", "s3cret", "./data/x.zarrvectors"}},
		{"token=", []string{"zvfserve", "serve", "--token=s3cret", "./data/x.zarrvectors"}},
		{"single dash", []string{"zvfserve", "-token", "s3cret"}},
		{"store URL", []string{"zvfserve", "serve", "x=azblob://c/x?sas=s3cret&x=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Args = tc.args
			srv := apitest.New(t, api.Options{Token: "s3cret", Stores: openStores(t, "graph")})
			admin := httptest.NewServer(srv.AdminHandler())
			defer admin.Close()
			resp, err := http.Get(admin.URL + "/debug/pprof/cmdline")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || strings.Contains(string(b), "s3cret") || !strings.Contains(string(b), "zvfserve") {
				t.Fatalf("cmdline: %d %q", resp.StatusCode, b)
			}
		})
	}
}
