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
}

// TestPullWholeDetectsCuts: the whole-store client counts an answer as
// whole only when it is: a transport error, a well-formed but short body
// or an error status are each a cut.
func TestPullWholeDetectsCuts(t *testing.T) {
	t.Parallel()
	const whole = `{"vertices":[[1,2,3],[4,5,6]],"attributes":{},"offset":0,"count":2,"next":null}` + "\n"
	for _, tc := range []struct {
		name, encoding string
		serve          func(w http.ResponseWriter)
		want           string
	}{
		{"whole", "", func(w http.ResponseWriter) { io.WriteString(w, whole) }, ""},
		{"whole, zstd", "zstd", func(w http.ResponseWriter) {
			w.Header().Set("Content-Encoding", "zstd")
			zw, _ := zstd.NewWriter(w)
			io.WriteString(zw, whole)
			zw.Close()
		}, ""},
		{"well-formed but short", "", func(w http.ResponseWriter) {
			io.WriteString(w, `{"vertices":[[1,2,3]],"attributes":{},"offset":0,"count":1,"next":null}`+"\n")
		}, "well-formed but short"},
		{"aborted", "", func(w http.ResponseWriter) {
			io.WriteString(w, whole[:20])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}, "cut: unexpected EOF"},
		{"error status", "", func(w http.ResponseWriter) { w.WriteHeader(http.StatusGatewayTimeout) }, "status 504"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { tc.serve(w) }))
			defer ts.Close()
			c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
			defer c.CloseIdleConnections()
			_, _, err := pullWhole(context.Background(), c, ts.URL, tc.encoding, 2)
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}
