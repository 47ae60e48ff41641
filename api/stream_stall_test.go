package api_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/demo"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/storage/faultstore"
)

// stallStore is the demo's cells store (about 1.3 MB of NDJSON, 48
// chunks) read through a fault store.
func stallStore(t *testing.T) (*faultstore.Store, *zvf.Store) {
	t.Helper()
	ctx := context.Background()
	mem, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	if _, err := demo.Build(ctx, mem, demo.Options{Seed: 1, Scale: 1}); err != nil {
		t.Fatal(err)
	}
	fs := faultstore.New(storage.Sub(mem, "cells"), nil)
	s, err := zvf.Open(ctx, fs, zvf.Options{Name: "s"})
	if err != nil {
		t.Fatal(err)
	}
	return fs, s
}

// TestStallMidStreamIsCut: a backend read that hangs once the answer has
// started streaming (here the last chunk in key order, read after more
// than 256 KiB went out) cuts the answer within --request-timeout of the
// last write — the same bound the work before the first byte has — and
// ends the backend read with it, rather than holding the client, a work
// slot and the read until --stream-timeout. Before, the client got the
// first 0.85–1.4 MB and then nothing until the stream timeout (10 minutes
// by default), and the body ended as cut only then.
func TestStallMidStreamIsCut(t *testing.T) {
	t.Parallel()
	fs, s := stallStore(t)
	const (
		requestTimeout = 500 * time.Millisecond
		streamTimeout  = 30 * time.Second
	)
	_, ts := apitest.Serve(t, api.Options{Stores: []*zvf.Store{s}, RequestTimeout: requestTimeout, StreamTimeout: streamTimeout})
	const box = "/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9"
	for _, f := range []string{"ndjson", "bin"} {
		resp, whole := apitest.Get(t, ts, box+"&f="+f)
		if resp.StatusCode != 200 || len(whole) < 512<<10 {
			t.Fatalf("f=%s without faults: %d, %d bytes (the test needs an answer that streams)", f, resp.StatusCode, len(whole))
		}
		fs.Add(&faultstore.Rule{Op: "get", Key: "0/vertices/3.3.2", Fault: faultstore.Fault{Hang: true}})
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
		waitFor(t, "the stalled read ended with its answer", func() bool { return fs.InFlight.Load() == 0 })
		fs.Reset()
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
