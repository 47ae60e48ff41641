package api_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"sync"
	"testing"

	"gocloud.dev/blob/s3blob"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
)

// TestS3MatchesLocal serves reference stores from a real S3-compatible
// server (MinIO on loopback, started by .ci/run) through
// s3://…?endpoint=…&use_path_style=true and checks every answer equals
// the local-disk answer, also after the objects are replaced. Set ZVFSERVE_S3_ENDPOINT (and AWS_ACCESS_KEY_ID /
// AWS_SECRET_ACCESS_KEY) to run it; CI sets ZVFSERVE_REQUIRE_S3=1.
func TestS3MatchesLocal(t *testing.T) {
	t.Parallel()
	endpoint := s3Endpoint(t)
	ctx := context.Background()
	const bucket = "zvf-fixtures"
	createBucket(t, endpoint, bucket)
	names := []string{"graph", "points_pyramid", "mesh", "points_bins_blosc"}
	q := "?endpoint=" + url.QueryEscape(endpoint) + "&use_path_style=true&region=us-east-1"
	var s3Stores, localStores []*zvf.Store
	for _, n := range names {
		src := filepath.Join(fixtures, n+".zarrvectors")
		up, err := blobstore.Open(ctx, "s3://"+bucket+"/"+n+".zarrvectors"+q)
		if err != nil {
			t.Fatal(err)
		}
		uploadTree(t, up, src)
		s, err := zvf.Open(ctx, up, zvf.Options{Name: n, Cache: cache.New(64 << 20)})
		if err != nil {
			t.Fatalf("open %s from S3: %v", n, err)
		}
		t.Cleanup(func() { _ = up.Close() })
		s3Stores = append(s3Stores, s)
	}
	localStores = openStores(t, names...)
	_, remote := newServer(t, api.Options{Stores: s3Stores})
	_, local := newServer(t, api.Options{Stores: localStores})
	paths := []string{
		"/api/v1/stores",
		"/api/v1/stores/graph",
		"/api/v1/stores/graph/bbox?min=0,0,0&max=1000,1000,1000",
		"/api/v1/stores/graph/objects/1",
		"/api/v1/stores/points_pyramid/bbox?min=100,100,100&max=700,700,700&attributes=*&f=bin",
		"/api/v1/stores/points_pyramid/bbox?min=0,0,0&max=1000,1000,1000&level=1",
		"/api/v1/stores/points_pyramid/objects/3/manifest?level=1",
		"/api/v1/stores/points_pyramid/groups/1",
		"/api/v1/stores/mesh/bbox?min=150,150,150&max=250,250,250",
		"/api/v1/stores/points_bins_blosc/bbox?min=0,0,0&max=500,500,500&f=ndjson",
		"/api/v1/stores/graph/levels/0/chunks",
	}
	for _, p := range paths {
		r1, b1 := apitest.Get(t, remote, p)
		r2, b2 := apitest.Get(t, local, p)
		if r1.StatusCode != http.StatusOK || r2.StatusCode != http.StatusOK {
			t.Fatalf("%s: S3 %d, local %d: %s", p, r1.StatusCode, r2.StatusCode, b1)
		}
		// Descriptors' URLs are absolute, on each server's own address.
		b1 = bytes.ReplaceAll(b1, []byte(remote.URL), []byte(local.URL))
		if !bytes.Equal(b1, b2) {
			t.Fatalf("%s: S3 and local answers differ (%d vs %d bytes)", p, len(b1), len(b2))
		}
	}
	t.Logf("%d routes over %d stores: S3 answers equal local-disk answers", len(paths), len(names))
	// Objects replaced in the bucket: new ETags, so a refresh reopens the
	// store with fresh caches and the answers follow.
	t.Run("replaced objects", func(t *testing.T) { checkReplacedObjects(t, "s3://"+bucket+"/replaced.zarrvectors"+q) })
	t.Run("requests per check", func(t *testing.T) { checkRequestsPerCheck(t, endpoint, bucket, names) })
}

// requestCounter counts the HTTP requests an S3 client sends, by method.
type requestCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *requestCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n[r.Method]++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (c *requestCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// checkRequestsPerCheck: against a real S3 server, opening a store sends
// no whole-store listing and a revalidation sends one LIST and a HEAD per
// metadata object (root and each level), however many objects the store
// has. Before, both listed every object: on S3 a LIST per thousand objects
// (1,000 a minute for a 1M-object store, per replica).
func checkRequestsPerCheck(t *testing.T, endpoint, bucket string, names []string) {
	ctx := context.Background()
	rc := &requestCounter{n: map[string]int{}}
	b, err := s3blob.OpenBucket(ctx, s3Client(endpoint, &http.Client{Transport: rc}), bucket, nil)
	if err != nil {
		t.Fatal(err)
	}
	all := blobstore.New(b)
	defer all.Close()
	for _, n := range names {
		objects := 0
		if err := storage.Sub(all, n+".zarrvectors").Walk(ctx, "", func(string, storage.Attrs) error { objects++; return nil }); err != nil {
			t.Fatal(err)
		}
		rc.take()
		h, err := zvf.OpenHandle(ctx, storage.Sub(all, n+".zarrvectors"), zvf.Options{Name: n}, zvf.Watch{Enabled: true})
		if err != nil {
			t.Fatal(err)
		}
		st, err := h.Current()
		if err != nil {
			t.Fatal(err)
		}
		atOpen := rc.take()
		const checks = 5
		for range checks {
			if changed, err := h.Refresh(ctx); changed || err != nil {
				t.Fatalf("%s: Refresh of an unchanged store: %v %v", n, changed, err)
			}
		}
		per := rc.take()
		levels := len(st.Levels())
		if per["GET"] != checks || per["HEAD"] != checks*(1+levels) || len(per) != 2 {
			t.Errorf("%s (%d objects, %d levels): %v requests in %d checks, want %d LIST and %d HEAD", n, objects, levels, per, checks, checks, checks*(1+levels))
		}
		t.Logf("%s: %d objects; opening sent %v; each check %d LIST + %d HEAD", n, objects, atOpen, per["GET"]/checks, per["HEAD"]/checks)
	}
}
