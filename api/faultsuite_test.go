package api_test

// The fault-injection suite: stores behind injected network and backend
// faults — an S3 store read through a proxy in front of MinIO that delays,
// stalls, resets and truncates responses (faultstore.Proxy), and a local
// folder read through a fault store (faultstore.Store) — and what every
// answer must be under them: exact, or a visible typed failure (never a
// 200 with data missing); no reopen, cache flush or ETag change for a
// blip; the checks of other stores going on while one backend hangs; every
// request ended by its deadline. The S3 half needs MinIO (.ci/run starts
// it; set ZVFSERVE_S3_ENDPOINT, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY
// to run it elsewhere); with ZVFSERVE_REQUIRE_S3=1 it fails instead of
// skipping.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore/s3store"
	"github.com/zvfserve/zvfserve/zvf/storage/faultstore"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// faultBackend is one store behind injected faults, with the faults a
// test needs named by what they do.
type faultBackend struct {
	name string
	st   storage.Store  // what the server reads, through the faults
	w    storage.Writer // the same store, written around the faults
	// cutNextChunk makes the next read of a vertex chunk fail mid-answer
	// (S3: the body cut after its headers; local: the error that is).
	cutNextChunk func()
	// resetNextChunk drops the connection of the next read of a vertex
	// chunk before it answers.
	resetNextChunk func()
	// cutReads makes every read fail mid-answer until heal.
	cutReads func()
	// stallReads makes every read hang until its caller gives up;
	// stallBodies sends each read's headers and part of its body, then
	// hangs (local: the same as stallReads).
	stallReads, stallBodies func()
	// stallChecks makes the listings and stats a check runs hang.
	stallChecks func()
	heal        func()
	// inFlight counts backend requests not yet ended.
	inFlight func() int64
}

// s3Endpoint is MinIO's address, or "" (the test is skipped, or fails
// under ZVFSERVE_REQUIRE_S3=1).
func s3Endpoint(t *testing.T) string {
	t.Helper()
	endpoint := os.Getenv("ZVFSERVE_S3_ENDPOINT")
	if endpoint == "" {
		if os.Getenv("ZVFSERVE_REQUIRE_S3") == "1" {
			t.Fatal("ZVFSERVE_REQUIRE_S3=1 but ZVFSERVE_S3_ENDPOINT is not set")
		}
		t.Skip("no S3 endpoint (ZVFSERVE_S3_ENDPOINT); .ci/run starts MinIO for the fault suite")
	}
	return endpoint
}

// s3Client is a client of MinIO at endpoint, sending through hc (nil: the
// SDK's default).
func s3Client(endpoint string, hc s3.HTTPClient) *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true, HTTPClient: hc,
		Credentials: credentials.NewStaticCredentialsProvider(os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), "")})
}

// createBucket makes sure MinIO at endpoint has bucket.
func createBucket(t *testing.T, endpoint, bucket string) {
	t.Helper()
	if _, err := s3Client(endpoint, nil).CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil && !strings.Contains(err.Error(), "BucketAlreadyOwnedByYou") {
		t.Logf("create bucket: %v (continuing; it may exist)", err)
	}
}

// s3Drivers opens s3:// URLs: the tests against MinIO are the api tests
// that link the S3 driver.
func s3Drivers() blobstore.Drivers { return blobstore.Drivers{s3store.Scheme: s3store.Open} }

const faultBucket = "zvf-faults"

var faultPrefixes atomic.Int64

// s3FaultBackend uploads fixture to a fresh prefix of MinIO and opens it
// through a fault proxy.
func s3FaultBackend(t *testing.T, fixture string) *faultBackend {
	t.Helper()
	endpoint := s3Endpoint(t)
	createBucket(t, endpoint, faultBucket)
	prefix := fmt.Sprintf("%s-%d-%d", fixture, time.Now().UnixNano(), faultPrefixes.Add(1))
	q := "&use_path_style=true&region=us-east-1"
	w := zvftest.StoreWith(t, "s3://"+faultBucket+"/"+prefix+"?endpoint="+url.QueryEscape(endpoint)+q, s3Drivers())
	uploadTree(t, w, filepath.Join(fixtures, fixture+".zarrvectors"))
	p, err := faultstore.NewProxy(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	// A short header timeout, so that a stall before headers fails a read
	// long before a check's deadline (the SDK retries it twice).
	st := zvftest.StoreWith(t, "s3://"+faultBucket+"/"+prefix+"?endpoint="+url.QueryEscape(p.URL)+q+"&header_timeout=2s", s3Drivers())
	chunk := "/" + prefix + "/0/vertices/"
	one := func(f faultstore.HTTPFault) func() {
		return func() { p.Add(&faultstore.HTTPRule{Method: http.MethodGet, Path: chunk, Nth: 1, Fault: f}) }
	}
	every := func(method string, f faultstore.HTTPFault) func() {
		return func() { p.Add(&faultstore.HTTPRule{Method: method, Fault: f}) }
	}
	return &faultBackend{name: "s3", st: st, w: w,
		cutNextChunk:   one(faultstore.HTTPFault{Truncate: true, After: 7}),
		resetNextChunk: one(faultstore.HTTPFault{Reset: true}),
		cutReads:       every(http.MethodGet, faultstore.HTTPFault{Truncate: true, After: 3}),
		stallReads:     every(http.MethodGet, faultstore.HTTPFault{Stall: true}),
		stallBodies:    every(http.MethodGet, faultstore.HTTPFault{StallBody: true, After: 1}),
		stallChecks:    every(http.MethodHead, faultstore.HTTPFault{Stall: true}),
		heal:           p.Reset,
		inFlight:       p.InFlight.Load,
	}
}

// localFaultBackend copies fixture to a folder read through a fault store.
func localFaultBackend(t *testing.T, fixture string) *faultBackend {
	t.Helper()
	dir := zvftest.CopyTree(t, filepath.Join(fixtures, fixture+".zarrvectors"))
	w := zvftest.Store(t, dir)
	fs := faultstore.New(w, nil)
	// What blobstore makes of a body cut short: the backend failing.
	cut := fmt.Errorf("%w: %w", storage.ErrUnavailable, io.ErrUnexpectedEOF)
	one := func(f faultstore.Fault) func() {
		return func() { fs.Add(&faultstore.Rule{Op: "get", Key: "0/vertices/", Nth: 1, Fault: f}) }
	}
	every := func(op string, f faultstore.Fault) func() {
		return func() { fs.Add(&faultstore.Rule{Op: op, Fault: f}) }
	}
	return &faultBackend{name: "local", st: fs, w: w,
		cutNextChunk:   one(faultstore.Fault{Err: cut}),
		resetNextChunk: one(faultstore.Fault{Err: fmt.Errorf("%w: connection reset by peer", storage.ErrUnavailable)}),
		cutReads:       every("get", faultstore.Fault{Err: cut}),
		stallReads:     every("get", faultstore.Fault{Hang: true}),
		stallBodies:    every("get", faultstore.Fault{Hang: true}),
		stallChecks:    every("stat", faultstore.Fault{Hang: true}),
		heal:           fs.Reset,
		inFlight:       fs.InFlight.Load,
	}
}

// faultBackends runs f on each backend, as a parallel subtest.
func faultBackends(t *testing.T, fixture string, f func(t *testing.T, b *faultBackend)) {
	for _, bk := range []struct {
		name string
		mk   func(*testing.T, string) *faultBackend
	}{{"local", localFaultBackend}, {"s3", s3FaultBackend}} {
		t.Run(bk.name, func(t *testing.T) {
			t.Parallel()
			f(t, bk.mk(t, fixture))
		})
	}
}

// faultServer serves b's store as "s" through a watching handle.
func faultServer(t *testing.T, b *faultBackend, o api.Options) (*zvf.Handle, *api.Server, *cache.Cache) {
	t.Helper()
	settled(t, b.w)
	ch := cache.New(64 << 20)
	o.Cache = ch
	hs, srv := watchedServer(t, map[string]storage.Store{"s": b.st}, ch, o)
	if _, err := hs["s"].Current(); err != nil {
		t.Fatal(err)
	}
	return hs["s"], srv, ch
}

const (
	faultHalf  = "/api/v1/stores/s/bbox?min=0,0,0&max=500,1000,1000&attributes=*"
	faultWhole = "/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&attributes=*"
)

// exactOrTyped fails t unless an answer is 200 with the reference body, or
// a problem of one of kinds that says when to retry.
func exactOrTyped(t *testing.T, what string, code int, hdr http.Header, body, want []byte, kinds ...string) {
	t.Helper()
	if code == 200 {
		if !bytes.Equal(body, want) {
			t.Fatalf("%s: 200 with %d bytes, not the exact answer (%d bytes)", what, len(body), len(want))
		}
		return
	}
	wantProblem(t, what, code, body, kinds...)
	if hdr.Get("Retry-After") == "" {
		t.Fatalf("%s: %d without Retry-After", what, code)
	}
}

// TestFaultBlipIsNotAChange: reads cut mid-body, connections reset, a
// check that cannot list: each answer is exact (the SDK retried) or a
// typed 502/503 with Retry-After, and none of it reopens the store, flushes
// its cache or changes an ETag. Before, a cut body was taken for a store
// change: the store reopened, its whole cache went (411 → 0 items), every
// ETag changed, and clients got 503 store-changing.
func TestFaultBlipIsNotAChange(t *testing.T) {
	t.Parallel()
	ref := localServer(t, "s", filepath.Join(fixtures, "graph.zarrvectors"))
	_, _, wantHalf := serveFull(t, ref.Handler(), faultHalf)
	_, _, wantWhole := serveFull(t, ref.Handler(), faultWhole)
	faultBackends(t, "graph", func(t *testing.T, b *faultBackend) {
		h, srv, ch := faultServer(t, b, api.Options{})
		s0, _ := h.Current()
		code, hdr, body := serveFull(t, srv.Handler(), faultHalf)
		if code != 200 || !bytes.Equal(body, wantHalf) {
			t.Fatalf("half box without faults: %d %.200s", code, body)
		}
		etag, items := hdr.Get("ETag"), ch.Stats().Items
		for _, blip := range []struct {
			name string
			add  func()
		}{{"cut body", b.cutNextChunk}, {"reset", b.resetNextChunk}, {"every read cut", b.cutReads}} {
			blip.add()
			code, hdr, body := serveFull(t, srv.Handler(), faultWhole)
			exactOrTyped(t, blip.name+": whole box", code, hdr, body, wantWhole, "backend-unavailable")
			b.heal()
			if s, err := h.Current(); s != s0 || err != nil {
				t.Fatalf("%s: the store reopened (%v)", blip.name, err)
			}
			if n := ch.Stats().Items; n < items {
				t.Fatalf("%s: the cache went from %d items to %d", blip.name, items, n)
			}
			code, hdr, body = serveFull(t, srv.Handler(), faultHalf)
			if code != 200 || !bytes.Equal(body, wantHalf) || hdr.Get("ETag") != etag {
				t.Fatalf("%s: half box after it: %d, ETag %s (was %s)", blip.name, code, hdr.Get("ETag"), etag)
			}
		}
		// A check that cannot read the metadata fails, and changes nothing.
		b.cutReads()
		b.stallChecks()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		changed, err := h.Refresh(ctx)
		cancel()
		b.heal()
		if changed || err == nil {
			t.Fatalf("a check under faults: changed=%v err=%v", changed, err)
		}
		if s, err := h.Current(); s != s0 || err != nil {
			t.Fatalf("a failed check reopened the store (%v)", err)
		}
		code, _, body = serveFull(t, srv.Handler(), faultWhole)
		if code != 200 || !bytes.Equal(body, wantWhole) || ch.Stats().Items < items {
			t.Fatalf("whole box once healed: %d (%d items cached, had %d)", code, ch.Stats().Items, items)
		}
	})
}

// TestFaultReopenKeepsWorkingVersion: the store changes and its reopen
// meets a failing backend: the version that works keeps answering, and
// the next check, once the backend is back, opens the new one. Before,
// the failed open replaced the working version and the store answered 502
// until the next check (forever with revalidation off).
func TestFaultReopenKeepsWorkingVersion(t *testing.T) {
	t.Parallel()
	ref := localServer(t, "s", filepath.Join(fixtures, "graph.zarrvectors"))
	_, _, want := serveFull(t, ref.Handler(), faultHalf)
	faultBackends(t, "graph", func(t *testing.T, b *faultBackend) {
		h, srv, _ := faultServer(t, b, api.Options{})
		s0, _ := h.Current()
		code, hdr, body := serveFull(t, srv.Handler(), faultHalf)
		if code != 200 || !bytes.Equal(body, want) {
			t.Fatalf("before: %d %.200s", code, body)
		}
		etag := hdr.Get("ETag")
		// The same bytes written again: a new version of every object.
		uploadTree(t, b.w, filepath.Join(fixtures, "graph.zarrvectors"))
		settled(t, b.w)
		b.cutReads()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		changed, err := h.Refresh(ctx)
		cancel()
		if changed || !errors.Is(err, zvf.ErrUnavailable) {
			t.Fatalf("a reopen under a failing backend: changed=%v err=%v", changed, err)
		}
		if s, err := h.Current(); s != s0 || err != nil {
			t.Fatalf("the failed reopen replaced the working version (%v)", err)
		}
		if code, hdr, body := serveFull(t, srv.Handler(), faultHalf); code != 200 || !bytes.Equal(body, want) || hdr.Get("ETag") != etag {
			t.Fatalf("the working version's cached answer: %d %.200s", code, body)
		}
		b.heal()
		settled(t, b.w)
		var s1 *zvf.Store
		for i := 0; i < 5 && s1 == nil; i++ {
			if _, err := h.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			if s, _ := h.Current(); s != s0 {
				s1 = s
			}
			settled(t, b.w)
		}
		if s1 == nil {
			t.Fatal("the new version did not open once the backend was back")
		}
		code, hdr, body = serveFull(t, srv.Handler(), faultHalf)
		if code != 200 || !bytes.Equal(body, want) || hdr.Get("ETag") == etag {
			t.Fatalf("the new version: %d, ETag %s (the old one was %s)", code, hdr.Get("ETag"), etag)
		}
	})
}

// TestFaultRequestsEndByTheirDeadline: a backend that takes reads and
// never answers them, or answers part of a body and stops: every request
// ends by its deadline with a typed 504, and no backend request outlives
// it. Reads of checks end too (their own deadline).
func TestFaultRequestsEndByTheirDeadline(t *testing.T) {
	t.Parallel()
	faultBackends(t, "graph", func(t *testing.T, b *faultBackend) {
		const timeout = 500 * time.Millisecond
		_, srv, _ := faultServer(t, b, api.Options{RequestTimeout: timeout})
		for _, stall := range []struct {
			name string
			add  func()
		}{{"no answer", b.stallReads}, {"a body that stops", b.stallBodies}} {
			stall.add()
			start := time.Now()
			code, _, body := serveFull(t, srv.Handler(), faultWhole)
			took := time.Since(start)
			wantProblem(t, stall.name, code, body, "timeout")
			if took < timeout || took > timeout+5*time.Second {
				t.Fatalf("%s: answered after %v, the deadline was %v", stall.name, took, timeout)
			}
			waitFor(t, stall.name+": backend requests ended", func() bool { return b.inFlight() == 0 })
			b.heal()
		}
	})
}

// TestFaultOtherStoresStillChecked: an S3 store's backend hangs during its
// checks while a local store beside it is rewritten: the local store's
// new version is served on schedule, and the S3 store's stuck checks end
// by their deadline. Before, checks ran one store after another with no
// deadline: one hung request stopped the revalidation of every store.
func TestFaultOtherStoresStillChecked(t *testing.T) {
	t.Parallel()
	b := s3FaultBackend(t, "graph")
	ctx := context.Background()
	dir := zvftest.CopyTree(t, filepath.Join(fixtures, rewrittenFixture))
	local := zvftest.Store(t, dir)
	settled(t, b.w)
	ch := cache.New(64 << 20)
	hs, srv := watchedServer(t, map[string]storage.Store{"remote": b.st, "local": local}, ch, api.Options{Cache: ch})
	hl := hs["local"]
	before, _ := hl.Current()
	b.stallChecks()
	b.stallReads()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Revalidate(rctx, 20*time.Millisecond, time.Second, false)
	}()
	defer func() { stop(); <-done }()
	waitFor(t, "the remote store's check reached its stalled backend", func() bool { return b.inFlight() > 0 })
	rewriteInPlace(t, dir, filepath.Join(fixtures, rewrittenFixture))
	waitFor(t, "the local store's new version served while the remote one hangs", func() bool {
		s, err := hl.Current()
		return err == nil && s != before
	})
	const box = "/api/v1/stores/local/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9"
	_, _, want := serveFull(t, localServer(t, "local", filepath.Join(fixtures, rewrittenFixture)).Handler(), box)
	if code, _, body := serveFull(t, srv.Handler(), box); code != 200 || !bytes.Equal(body, want) {
		t.Fatalf("local store after its change: %d %.200s", code, body)
	}
	// The remote store's checks end by their deadline: its stalled
	// requests come and go rather than pile up.
	if n := b.inFlight(); n > 8 {
		t.Fatalf("%d requests to the stalled backend in flight", n)
	}
	if code, _, body := serveFull(t, srv.Handler(), "/api/v1/stores/remote"); code != 200 || !strings.Contains(string(body), `"remote"`) {
		t.Fatalf("the remote store's descriptor while its backend hangs: %d %.200s", code, body)
	}
}
