package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// versionedRequests are data paths of store s (the rewritten fixture),
// relative to /api/v1/stores/s/ or /api/v1/stores/s/v{version}/.
var versionedRequests = []string{
	"bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&limit=50",
	"count?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9",
	"density?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&shape=2,2,2&f=json",
	"queryables",
	"objects/0/levels",
	"levels/0/chunks",
}

// TestVersionedPathsAfterStoreChange: data URLs did not name the store
// version, so a browser (or CDN) holding answers for --max-age showed a
// replaced store's old descriptor and old rows after a reload. The
// descriptor is revalidated on every use (no-cache, a 304 while the
// version stands) and names the version; the data routes answer under it
// as immutable, and once the store changed an old version's path is a
// 410 store-changed naming the current version. The unversioned paths
// answer as before (--max-age).
func TestVersionedPathsAfterStoreChange(t *testing.T) {
	t.Parallel()
	dir := zvftest.CopyTree(t, filepath.Join(fixtures, rewrittenFixture))
	base := zvftest.Store(t, dir)
	hs, srv := watchedServer(t, map[string]storage.Store{"s": base}, cache.New(64<<20), api.Options{MaxAge: time.Hour})
	if _, err := hs["s"].Current(); err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	get := func(p string, hdr ...string) (int, http.Header, []byte) {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, p, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		return serveRequest(t, h, req)
	}
	describe := func(hdr ...string) (int, http.Header, string) {
		t.Helper()
		code, hh, body := get("/api/v1/stores/s", hdr...)
		var d struct {
			Version string `json:"version"`
		}
		if code == http.StatusOK && (json.Unmarshal(body, &d) != nil || d.Version == "") {
			t.Fatalf("descriptor names no version: %.300s", body)
		}
		if cc := hh.Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("descriptor: Cache-Control %q, want no-cache: a reload would not see a replaced store", cc)
		}
		return code, hh, d.Version
	}
	_, h1, v1 := describe()
	if code, _, _ := describe("If-None-Match", h1.Get("ETag")); code != http.StatusNotModified {
		t.Errorf("descriptor revalidated while unchanged: %d, want 304", code)
	}
	for _, p := range versionedRequests {
		code, hv, body := get("/api/v1/stores/s/v" + v1 + "/" + p)
		if code != http.StatusOK || hv.Get("Cache-Control") != "public, max-age=31536000, immutable" {
			t.Errorf("%s at its version: %d, Cache-Control %q: %.200s", p, code, hv.Get("Cache-Control"), body)
		}
		pcode, hp, plain := get("/api/v1/stores/s/" + p)
		// The same bytes (queryables' $id names the path it was asked at).
		same := bytes.Equal(bytes.ReplaceAll(body, []byte("/v"+v1+"/"), []byte("/")), plain)
		if pcode != http.StatusOK || !same || hp.Get("Cache-Control") != "public, max-age=3600" {
			t.Errorf("%s unversioned: %d, Cache-Control %q, same bytes %v", p, pcode, hp.Get("Cache-Control"), same)
		}
	}

	rewriteInPlace(t, dir, filepath.Join(fixtures, rewrittenFixture))
	settled(t, base)
	if err := srv.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, h2, v2 := describe("If-None-Match", h1.Get("ETag"))
	if code != http.StatusOK || v2 == v1 || h2.Get("ETag") == h1.Get("ETag") {
		t.Fatalf("descriptor after the change, revalidated with the old tag: %d, version %s (was %s), ETag %s (was %s)", code, v2, v1, h2.Get("ETag"), h1.Get("ETag"))
	}
	for _, p := range versionedRequests {
		code, hv, body := get("/api/v1/stores/s/v" + v1 + "/" + p)
		var pr api.Problem
		if code != http.StatusGone || json.Unmarshal(body, &pr) != nil || !strings.HasSuffix(pr.Type, "/store-changed") ||
			!strings.Contains(pr.Detail, v2) || !strings.HasPrefix(hv.Get("Content-Type"), "application/problem+json") || hv.Get("Cache-Control") != "no-store" {
			t.Errorf("%s at the old version: %d %s %q %.300s", p, code, hv.Get("Content-Type"), hv.Get("Cache-Control"), body)
		}
		if code, _, body := get("/api/v1/stores/s/v" + v2 + "/" + p); code != http.StatusOK {
			t.Errorf("%s at the new version: %d %.200s", p, code, body)
		}
	}
	// A version no descriptor names is a 404 that says the current one.
	for _, v := range []string{"", "ZZ", "0123.4"} {
		code, _, body := get("/api/v1/stores/s/v" + v + "/count?min=0,0,0&max=1,1,1")
		var pr api.Problem
		if code != http.StatusNotFound || json.Unmarshal(body, &pr) != nil || !strings.Contains(pr.Detail, "v"+v2+"/") {
			t.Errorf("version %q: %d %.300s", v, code, body)
		}
	}
}
