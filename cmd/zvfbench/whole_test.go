package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestWhole runs the whole-store load small: clients pull the whole store
// as JSON from a zvfserve server process, every answer whole, the
// server's peak RSS and times reported with their median and spread. The
// store is a reference fixture linked in as --store's 'points' (writing
// and removing a synthetic one takes seconds of small files). End to end:
// it builds zvfserve.
func TestWhole(t *testing.T) {
	bin := zvfserveForTest(t)
	t.Parallel()
	dir := t.TempDir()
	fixture, err := filepath.Abs("../../testdata/zvf-reference/points_pyramid.zarrvectors")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fixture, filepath.Join(dir, "points")); err != nil {
		t.Fatal(err)
	}
	for _, enc := range []string{"", "zstd"} {
		rep, b, stdout := benchJSON[wholeReport](t, "whole", "--clients", "4", "--runs", "2", "--store", dir, "--server-bin", bin,
			"--accept-encoding", enc)
		if len(rep.Runs) != 2 || rep.Vertices != 20000 || rep.ServerPeakRSSMB[0] <= 0 || rep.WallSeconds[1] > rep.WallSeconds[2] {
			t.Fatalf("%q: %s", enc, b)
		}
		for _, r := range rep.Runs {
			if r.Complete != 4 || r.Cut != 0 || r.ServerPeakRSSMB <= 0 {
				t.Errorf("%q: run %+v", enc, r)
			}
		}
		if !strings.Contains(stdout, "median (min–max) over 2 runs") {
			t.Errorf("%q: %s", enc, stdout)
		}
	}
	// Wide rows: 17,000 rows of 512 bytes are more than a JSON page holds
	// (8 MiB), so each client follows a cursor to a second page.
	rep, b, _ := benchJSON[wholeReport](t, "whole", "--clients", "2", "--runs", "1", "--points", "17000", "--channels", "128",
		"--store", dir, "--server-bin", bin)
	if len(rep.Runs) != 1 || rep.Vertices != 17000 || rep.Channels != 128 || rep.Runs[0].Complete != 2 || rep.Runs[0].Pages != 4 {
		t.Fatalf("--channels 128: %s", b)
	}
}

// TestPullPagesDetectsCuts: the whole-store client counts an answer as
// whole only when it is: every page ended (a transport error, an error
// status or a body without its closing members are cuts), the pages
// followed by their cursors, and the vertices they hold all there is.
func TestPullPagesDetectsCuts(t *testing.T) {
	t.Parallel()
	const whole = `{"vertices":[[1,2,3],[4,5,6]],"attributes":{},"offset":0,"count":2,"next":null}` + "\n"
	for _, tc := range []struct {
		name, encoding string
		serve          func(w http.ResponseWriter, r *http.Request)
		pages          int
		want           string
	}{
		{"whole", "", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, whole) }, 1, ""},
		{"whole, zstd", "zstd", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Encoding", "zstd")
			zw, _ := zstd.NewWriter(w)
			io.WriteString(zw, whole)
			zw.Close()
		}, 1, ""},
		{"two pages", "", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("cursor") == "c-1" {
				io.WriteString(w, `{"vertices":[[4,5,6]],"attributes":{},"offset":1,"count":1,"next":null}`+"\n")
				return
			}
			io.WriteString(w, `{"vertices":[[1,2,3]],"attributes":{},"offset":0,"count":1,"next":"c-1"}`+"\n")
		}, 2, ""},
		{"well-formed but short", "", func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, `{"vertices":[[1,2,3]],"attributes":{},"offset":0,"count":1,"next":null}`+"\n")
		}, 1, "well-formed but short"},
		{"no closing members", "", func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, whole[:40])
		}, 1, "well-formed but short"},
		{"aborted", "", func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, whole[:20])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}, 1, "cut: unexpected EOF"},
		{"error status", "", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusGatewayTimeout) }, 1, "status 504"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(tc.serve))
			defer ts.Close()
			c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
			defer c.CloseIdleConnections()
			_, _, pages, err := pullPages(context.Background(), c, ts.URL+"/?f=json", tc.encoding, 2)
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) || pages != tc.pages {
				t.Fatalf("%d pages, %v; want %d, %q", pages, err, tc.pages, tc.want)
			}
		})
	}
}
