package api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/demo"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/storage/faultstore"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// demoCells writes the demo's cells store (about 1.3 MB of NDJSON, 48
// chunks) into a folder and returns it.
func demoCells(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	w, err := blobstore.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	if _, err := demo.Build(ctx, w, demo.Options{Seed: 1, Scale: 1}); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "cells")
}

// stallStore is the demo's cells store read through a fault store.
func stallStore(t *testing.T) (*faultstore.Store, *zvf.Store) {
	t.Helper()
	fs := faultstore.New(zvftest.Store(t, demoCells(t)), nil)
	s, err := zvf.Open(context.Background(), fs, zvf.Options{Name: "s"})
	if err != nil {
		t.Fatal(err)
	}
	return fs, s
}

// stallLast is the last vertex chunk of the demo's cells in key order:
// read after more than 256 KiB of the whole box's answer went out.
const stallLast = "0/vertices/3.3.2/"

// TestStallMidStreamIsCut: a backend read that hangs once the answer has
// started streaming — a local read that never returns, or an S3 GET whose
// body stops after its headers (MinIO behind a fault proxy) — cuts the
// answer within --request-timeout of the last write, the same bound the
// work before the first byte has, and ends the backend read with it,
// rather than holding the client, a work slot and the read until
// --stream-timeout. Before, the client got the first 0.85–1.4 MB and then
// nothing until the stream timeout (10 minutes by default), and the body
// ended as cut only then.
func TestStallMidStreamIsCut(t *testing.T) {
	t.Parallel()
	cells := demoCells(t)
	for _, bk := range []struct {
		name string
		open func(t *testing.T) (st storage.Store, stall, heal func(), inFlight func() int64)
	}{
		{"local", func(t *testing.T) (storage.Store, func(), func(), func() int64) {
			fs := faultstore.New(zvftest.Store(t, zvftest.CopyTree(t, cells)), nil)
			return fs, func() { fs.Add(&faultstore.Rule{Op: "get", Key: stallLast, Fault: faultstore.Fault{Hang: true}}) }, fs.Reset, fs.InFlight.Load
		}},
		{"s3", func(t *testing.T) (storage.Store, func(), func(), func() int64) {
			endpoint := s3Endpoint(t)
			createBucket(t, endpoint, faultBucket)
			prefix := fmt.Sprintf("stall-%d-%d", time.Now().UnixNano(), faultPrefixes.Add(1))
			q := "&use_path_style=true&region=us-east-1"
			uploadTree(t, zvftest.StoreWith(t, "s3://"+faultBucket+"/"+prefix+"?endpoint="+url.QueryEscape(endpoint)+q, s3Drivers()), cells)
			p, err := faultstore.NewProxy(endpoint)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			st := zvftest.StoreWith(t, "s3://"+faultBucket+"/"+prefix+"?endpoint="+url.QueryEscape(p.URL)+q, s3Drivers())
			stall := func() {
				p.Add(&faultstore.HTTPRule{Method: http.MethodGet, Path: "/" + prefix + "/" + stallLast, Fault: faultstore.HTTPFault{StallBody: true, After: 1}})
			}
			return st, stall, p.Reset, p.InFlight.Load
		}},
	} {
		t.Run(bk.name, func(t *testing.T) {
			t.Parallel()
			st, stall, heal, inFlight := bk.open(t)
			s, err := zvf.Open(context.Background(), st, zvf.Options{Name: "s"})
			if err != nil {
				t.Fatal(err)
			}
			const (
				requestTimeout = 500 * time.Millisecond
				streamTimeout  = 30 * time.Second
			)
			_, ts := apitest.Serve(t, api.Options{Stores: []*zvf.Store{s}, RequestTimeout: requestTimeout, StreamTimeout: streamTimeout})
			const box = "/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9"
			for _, f := range []string{"ndjson", "bin"} {
				// The whole answer without faults, which also caches what the
				// stalled one reads before its stall: on a loaded machine a
				// cold read from MinIO can pass the 500 ms before the first
				// byte (a 504), which the next try, on a warmer cache, does not.
				resp, whole := apitest.Get(t, ts, box+"&f="+f)
				for try := 1; resp.StatusCode == http.StatusGatewayTimeout && try < 5; try++ {
					resp, whole = apitest.Get(t, ts, box+"&f="+f)
				}
				if resp.StatusCode != 200 || len(whole) < 512<<10 {
					t.Fatalf("f=%s without faults: %d, %d bytes (the test needs an answer that streams)", f, resp.StatusCode, len(whole))
				}
				stall()
				start := time.Now()
				resp, err := ts.Client().Get(ts.URL + box + "&f=" + f)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != 200 {
					t.Fatalf("f=%s: the answer did not start before the stalled read: %d", f, resp.StatusCode)
				}
				body, err := io.ReadAll(resp.Body)
				took := time.Since(start)
				_ = resp.Body.Close()
				if err == nil {
					t.Fatalf("f=%s: the body ended as whole (%d bytes of %d) over a read that never answered", f, len(body), len(whole))
				}
				if len(body) < 256<<10 || len(body) >= len(whole) {
					t.Fatalf("f=%s: %d bytes before the cut (whole: %d)", f, len(body), len(whole))
				}
				if took > requestTimeout+5*time.Second {
					t.Fatalf("f=%s: the client waited %v on a stalled read (--request-timeout %v, --stream-timeout %v)", f, took, requestTimeout, streamTimeout)
				}
				if v := resp.Trailer.Get("X-Vertex-Count"); v != "" {
					t.Fatalf("f=%s: a cut answer's trailer says %s vertices", f, v)
				}
				waitFor(t, "the stalled read ended with its answer", func() bool { return inFlight() == 0 })
				heal()
			}
		})
	}
}

// slowClient is a response writer whose every write waits on its
// client for pause, as one to a client reading slowly but steadily does.
type slowClient struct {
	*httptest.ResponseRecorder
	pause  time.Duration
	writes int
}

func (w *slowClient) Write(p []byte) (int, error) {
	w.writes++
	time.Sleep(w.pause)
	return w.ResponseRecorder.Write(p)
}

// TestSlowSteadyClientIsNotCutByTheWorkLimit: the bound of each stretch
// of work while an answer streams does not count the time spent waiting
// on the client: one whose every write takes longer than --request-timeout
// gets the whole answer.
func TestSlowSteadyClientIsNotCutByTheWorkLimit(t *testing.T) {
	t.Parallel()
	_, s := stallStore(t)
	const requestTimeout = 200 * time.Millisecond
	srv := apitest.New(t, api.Options{Stores: []*zvf.Store{s}, RequestTimeout: requestTimeout})
	const box = "/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&f=bin"
	code, _, whole := serveFull(t, srv.Handler(), box)
	if code != 200 || len(whole) < 300<<10 {
		t.Fatalf("without a slow client: %d, %d bytes (the test needs an answer that streams)", code, len(whole))
	}
	w := &slowClient{ResponseRecorder: httptest.NewRecorder(), pause: 2 * requestTimeout}
	func() {
		defer func() {
			if v := recover(); v != nil {
				t.Fatalf("the answer to a slow client was cut after %d of %d bytes (%d writes): %v", w.Body.Len(), len(whole), w.writes, v)
			}
		}()
		srv.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, box, nil))
	}()
	if w.Code != 200 || !bytes.Equal(w.Body.Bytes(), whole) || w.writes < 3 {
		t.Fatalf("a slow client: %d, %d of %d bytes in %d writes", w.Code, w.Body.Len(), len(whole), w.writes)
	}
}
