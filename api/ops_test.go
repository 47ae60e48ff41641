package api_test

import (
	"context"
	"net/http"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestReadyz: /readyz is 503 while a configured store does not serve (its
// open failed: bad credentials, a corrupt root), naming it, and 200 once
// it opens; with ReadyAny one serving store is enough. Draining wins.
func TestReadyz(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		any      bool
		downCode int
		downBody string
	}{
		{"every store", false, http.StatusServiceUnavailable, "1 of 2 stores not serving: late\n"},
		{"any store", true, http.StatusOK, "ready; 1 of 2 stores not serving: late\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ch := cache.New(64 << 20)
			bucket := zvftest.Store(t, "mem://")
			// Nothing there yet: the open fails, and the handle keeps
			// the error (and retries on Refresh).
			late, err := zvf.OpenHandle(ctx, bucket, zvf.Options{Name: "late", Cache: ch}, zvf.Watch{Enabled: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := late.Current(); err == nil {
				t.Fatal("an empty bucket opened as a store")
			}
			srv, ts := newServer(t, api.Options{Stores: openStores(t, "graph"), Handles: []*zvf.Handle{late}, ReadyAny: tc.any})
			readyz := func(want int, body string) {
				t.Helper()
				resp, b := apitest.Get(t, ts, "/readyz")
				if resp.StatusCode != want || string(b) != body || resp.Header.Get("Cache-Control") != "no-store" {
					t.Fatalf("/readyz: %d %q (Cache-Control %q), want %d %q", resp.StatusCode, b, resp.Header.Get("Cache-Control"), want, body)
				}
			}
			readyz(tc.downCode, tc.downBody)
			uploadTree(t, bucket, filepath.Join(fixtures, "graph.zarrvectors"))
			if err := srv.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			readyz(http.StatusOK, "ready\n")
			srv.SetReady(false)
			readyz(http.StatusServiceUnavailable, "draining\n")
		})
	}
}

// TestMetricsOnlyOnAdmin: with AdminMetrics (serve's --admin-addr) the
// public handler does not serve /metrics — it is a 404 there, so an
// Ingress in front of the public port does not publish it — while the
// admin handler does.
func TestMetricsOnlyOnAdmin(t *testing.T) {
	t.Parallel()
	for _, admin := range []bool{false, true} {
		srv, ts := newServer(t, api.Options{Stores: openStores(t, "graph"), AdminMetrics: admin})
		resp, body := apitest.Get(t, ts, "/metrics")
		want := http.StatusOK
		if admin {
			want = http.StatusNotFound
		}
		if resp.StatusCode != want {
			t.Errorf("AdminMetrics %v: public /metrics %d, want %d: %.100s", admin, resp.StatusCode, want, body)
		}
		if v := metric(t, srv, `zvfserve_http_requests_total\{code="`+strconv.Itoa(want)+`",outcome="complete",route="[^"]*"\}`); v < 1 {
			t.Errorf("AdminMetrics %v: the admin handler's metrics do not show the public request: %v", admin, v)
		}
	}
}

// TestBuildOf: what a build's information becomes, as debug.BuildInfo
// prints it for a tagged release, a commit with local changes, and a
// build without version control information (the text after the Go
// version, which is recorded apart).
func TestBuildOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		goVersion, info string
		want            api.Build
		line            string
	}{
		{"go1.26.0", "path\tgithub.com/zvfserve/zvfserve/cmd/zvfserve\nmod\tgithub.com/zvfserve/zvfserve\tv1.4.0\t\n" +
			"build\tvcs=git\nbuild\tvcs.revision=0123456789abcdef0123456789abcdef01234567\nbuild\tvcs.time=2026-03-01T10:00:00Z\nbuild\tvcs.modified=false\n",
			api.Build{Version: "v1.4.0", Revision: "0123456789abcdef0123456789abcdef01234567", Time: "2026-03-01T10:00:00Z", GoVersion: "go1.26.0"},
			"zvfserve v1.4.0 (revision 0123456789abcdef0123456789abcdef01234567, 2026-03-01T10:00:00Z) go1.26.0"},
		{"go1.26.1", "path\tgithub.com/zvfserve/zvfserve/cmd/zvfserve\nmod\tgithub.com/zvfserve/zvfserve\tv0.0.0-20260301100000-0123456789ab+dirty\t\n" +
			"build\tvcs=git\nbuild\tvcs.revision=0123456789abcdef0123456789abcdef01234567\nbuild\tvcs.time=2026-03-01T10:00:00Z\nbuild\tvcs.modified=true\n",
			api.Build{Version: "v0.0.0-20260301100000-0123456789ab+dirty", Revision: "0123456789abcdef0123456789abcdef01234567", Time: "2026-03-01T10:00:00Z",
				Modified: true, GoVersion: "go1.26.1"},
			"zvfserve v0.0.0-20260301100000-0123456789ab+dirty (revision 0123456789abcdef0123456789abcdef01234567, modified, 2026-03-01T10:00:00Z) go1.26.1"},
		{"go1.26.0", "path\tgithub.com/zvfserve/zvfserve/cmd/zvfserve\nmod\tgithub.com/zvfserve/zvfserve\t(devel)\t\n",
			api.Build{Version: "(devel)", GoVersion: "go1.26.0"}, "zvfserve (devel) go1.26.0"},
	} {
		bi, err := debug.ParseBuildInfo(tc.info)
		if err != nil {
			t.Fatal(err)
		}
		bi.GoVersion = tc.goVersion // ParseBuildInfo leaves it to the binary's own record
		got := api.BuildOf(bi)
		if got != tc.want || got.String() != tc.line {
			t.Errorf("%+v %q; want %+v %q", got, got.String(), tc.want, tc.line)
		}
	}
}
