package s3store_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore/bucket"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore/s3store"
	"github.com/zvfserve/zvfserve/zvf/storage/faultstore"
)

// fakeS3 answers GET and HEAD of the objects in objs (path-style,
// /bucket/key) as S3 does, and 404 NoSuchKey for any other key: enough of
// S3 for one read through the SDK.
func fakeS3(t *testing.T, objs map[string]string) string {
	t.Helper()
	mod := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC).Format(http.TimeFormat)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := objs[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code></Error>`))
			return
		}
		h := w.Header()
		h.Set("Content-Length", strconv.Itoa(len(body)))
		h.Set("ETag", `"`+strconv.Itoa(len(body))+`-etag"`)
		h.Set("Last-Modified", mod)
		h.Set("Content-Type", "application/octet-stream")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// proxied opens bucket "b" of a fake S3 holding key "k" through a fault
// proxy; q adds query parameters to the store URL.
func proxied(t *testing.T, q string) (storage.Writer, *faultstore.Proxy) {
	t.Helper()
	p, err := faultstore.NewProxy(fakeS3(t, map[string]string{"b/k": strings.Repeat("x", 4096)}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	st, err := open(context.Background(), "s3://b?region=us-east-1&anonymous=true&use_path_style=true&endpoint="+p.URL+q)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st, p
}

// TestCutBodyIsUnavailable: a response whose body ends before its
// announced length (a load balancer's reset, a proxy's timeout) is the
// backend failing, not the object changing: one response is one version.
// Before, it was ErrChanged, and the server reopened the store, dropped
// its cache and changed every ETag though no byte had.
func TestCutBodyIsUnavailable(t *testing.T) {
	t.Parallel()
	st, p := proxied(t, "")
	ctx := context.Background()
	if obj, err := st.Get(ctx, "k", storage.Whole(1<<20)); err != nil || len(obj.Data) != 4096 {
		t.Fatalf("through a proxy without faults: %d bytes, %v", len(obj.Data), err)
	}
	p.Add(&faultstore.HTTPRule{Method: http.MethodGet, Fault: faultstore.HTTPFault{Truncate: true, After: 1000}})
	_, err := st.Get(ctx, "k", storage.Whole(1<<20))
	if !errors.Is(err, storage.ErrUnavailable) || errors.Is(err, storage.ErrChanged) {
		t.Fatalf("a cut body: %v, want ErrUnavailable and not ErrChanged", err)
	}
	p.Reset()
	p.Add(&faultstore.HTTPRule{Method: http.MethodGet, Fault: faultstore.HTTPFault{Reset: true}})
	if _, err := st.Get(ctx, "k", storage.Whole(1<<20)); !errors.Is(err, storage.ErrUnavailable) || errors.Is(err, storage.ErrChanged) {
		t.Fatalf("a reset connection: %v, want ErrUnavailable and not ErrChanged", err)
	}
}

// TestS3HeaderTimeout: a server that takes a request and never answers
// fails the read with ErrUnavailable once the response-header timeout
// (and the SDK's retries) have passed, well before the caller's deadline.
// Before, the SDK's client had no such timeout: a read waited for its
// caller's deadline, and a check without one waited forever.
func TestS3HeaderTimeout(t *testing.T) {
	t.Parallel()
	st, p := proxied(t, "&header_timeout=100ms")
	p.Add(&faultstore.HTTPRule{Fault: faultstore.HTTPFault{Stall: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := st.Get(ctx, "k", storage.Whole(1<<20))
	if !errors.Is(err, storage.ErrUnavailable) || ctx.Err() != nil {
		t.Fatalf("a stalled server: %v (caller's context: %v), want ErrUnavailable before the caller's deadline", err, ctx.Err())
	}
	if _, err := st.Stat(ctx, "k"); !errors.Is(err, storage.ErrUnavailable) || ctx.Err() != nil {
		t.Fatalf("a stalled server, stat: %v, want ErrUnavailable", err)
	}
	if p.Requests.Load() < 2 {
		t.Fatalf("%d requests reached the proxy", p.Requests.Load())
	}
	if _, err := open(context.Background(), "s3://b?region=us-east-1&header_timeout=soon"); err == nil {
		t.Fatal("header_timeout=soon was accepted")
	}
}

// open opens an s3:// URL with the driver.
func open(ctx context.Context, rawURL string) (storage.Writer, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	return s3store.Open(ctx, u)
}

// TestNowMatchesStamps: an object written after Now carries a modification
// time at or after Now, as the backend stamps it — whole seconds for cloud
// stores (S3's Last-Modified), the exact time in memory. With an exact Now
// over S3, an object written later in the same second was stamped before
// it, so a reader that had opened a version at Now took the new object
// for part of it (the fleet test saw a 422: a new chunk read against old
// metadata).
func TestNowMatchesStamps(t *testing.T) {
	t.Parallel()
	s3, err := open(context.Background(), "s3://bucket?region=us-east-1&endpoint=http://127.0.0.1:9")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		st    storage.Store
		stamp func(time.Time) time.Time // how the backend records a write
	}{
		{"s3", s3, func(t time.Time) time.Time { return t.Truncate(time.Second) }},
		{"gocloud memblob", bucket.New(memblob.OpenBucket(nil), nil), func(t time.Time) time.Time { return t }},
	}
	for _, tc := range tests {
		for range 100 {
			now := tc.st.Now()
			if written := tc.stamp(time.Now()); written.Before(now) {
				t.Fatalf("%s: a write after Now %v is stamped %v, before it", tc.name, now, written)
			}
		}
		tc.st.Close()
	}
}
