package neuroglancer_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// decoded is an answer's body without its content coding.
func decoded(t *testing.T, resp *http.Response, body []byte) []byte {
	t.Helper()
	switch resp.Header.Get("Content-Encoding") {
	case "":
		return body
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t.Fatalf("unexpected Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	return nil
}

// TestSharedCacheKeepsInfosApart: servers of both sharding modes may share
// one cache; each info, compressed or not, must be its own server's (the
// sharded skeleton info, gzipped first, once reached the unsharded server).
func TestSharedCacheKeepsInfosApart(t *testing.T) {
	t.Parallel()
	stores := append(fixtureStores(t), largeIDStores(t)...)
	stores = append(stores, attributeRichStore(t))
	ch := cache.New(64 << 20)
	_, sharded := newServer(t, api.Options{Stores: stores, Cache: ch, NGSharded: neuroglancer.ShardAlways})
	_, plain := newServer(t, api.Options{Stores: stores, Cache: ch, NGSharded: neuroglancer.ShardNever})
	checked := 0
	for _, st := range stores {
		for _, route := range neuroglancer.RoutesOf(st) {
			if route != "skeletons" && route != "annotations" && route != "lines" {
				continue
			}
			path := "/ng/" + st.Name() + "/" + route + "/info"
			for _, enc := range []string{"gzip", "identity"} {
				resp, body := apitest.Get(t, sharded, path, "Accept-Encoding", enc)
				if got := decoded(t, resp, body); !bytes.Contains(got, []byte(`"sharding"`)) {
					t.Fatalf("%s (%s) from the sharded server has no sharding: %.300s", path, enc, got)
				}
				etag := resp.Header.Get("ETag")
				resp, body = apitest.Get(t, plain, path, "Accept-Encoding", enc)
				if got := decoded(t, resp, body); bytes.Contains(got, []byte(`"sharding"`)) {
					t.Fatalf("%s (%s) from the unsharded server is the sharded info: %.300s", path, enc, got)
				}
				// A client holding the sharded info (a server restarted
				// in another mode) must not have it confirmed.
				if resp, _ := apitest.Get(t, plain, path, "Accept-Encoding", enc, "If-None-Match", etag); etag == "" || resp.StatusCode != http.StatusOK {
					t.Fatalf("%s (%s): the unsharded server answers If-None-Match of the sharded info's ETag %s with %d", path, enc, etag, resp.StatusCode)
				}
				checked++
				t.Logf("%s %s %s %d", path, enc, resp.Header.Get("Content-Encoding"), len(body))
			}
		}
	}
	if checked == 0 {
		t.Fatal("no source checked")
	}
}

// attributeRichStore is a few polylines with enough vertex attributes that
// their skeleton info is long enough to be compressed.
func attributeRichStore(t *testing.T) *zvf.Store {
	t.Helper()
	dir := t.TempDir()
	const lines, per = 4, 8
	pos := make([]float32, 0, 3*lines*per)
	offsets := []int{0}
	for l := range lines {
		for i := range per {
			pos = append(pos, float32(10*l+i), float32(3*i), float32(l+1))
		}
		offsets = append(offsets, (l+1)*per)
	}
	var attrs []writer.Attribute
	for a := range 8 {
		v := make([]float32, lines*per)
		for i := range v {
			v[i] = float32(a*i) / 7
		}
		attrs = append(attrs, writer.Float32Attribute(fmt.Sprintf("a_rather_long_attribute_name_%d", a), 1, v))
	}
	w := zvftest.Store(t, dir)
	if _, err := writer.WritePolylines(context.Background(), w, "rich", &writer.Polylines{Positions: pos, Offsets: offsets, Attributes: attrs},
		writer.Options{ChunkShape: []float64{16, 16, 16}, BinShape: []float64{4, 4, 4}}); err != nil {
		t.Fatal(err)
	}
	return apitest.Open(t, dir+"/rich", "rich", cache.New(8<<20))
}

// TestSharedCacheKeepsPlansApart: servers of other options sharing one
// cache each answer as one alone would. Each option that shapes what is
// cached is changed between two servers in turn: --max-vertices aims the
// plan's spatial levels (and bounds a skeleton), and the shard byte scale
// sizes the shard specs. Before, the plan's key named only the store
// version and kind, so the second server served the first's plan: an
// info of the other bound's levels, cells of the other bound, and a
// skeleton over its own bound that the first server had kept.
func TestSharedCacheKeepsPlansApart(t *testing.T) {
	t.Parallel()
	stores := fixtureStores(t)
	st := storeNamed(t, stores, "points_pyramid")
	const narrowBound = 800
	ch := cache.New(64 << 20)
	_, wide := newServer(t, api.Options{Stores: stores, Cache: ch})
	_, narrow := newServer(t, api.Options{Stores: stores, Cache: ch, MaxVertices: narrowBound})
	_, alone := newServer(t, api.Options{Stores: stores, MaxVertices: narrowBound})
	const info = "/ng/points_pyramid/annotations/info"
	wideInfo := apitest.MustGet(t, wide, info)
	inf, err := parseInfo(apitest.MustGet(t, alone, info))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := apitest.MustGet(t, narrow, info), apitest.MustGet(t, alone, info); !bytes.Equal(got, want) || bytes.Equal(want, wideInfo) {
		t.Errorf("--max-vertices %d beside a server of the default on one cache: info %.300s\nwant (alone) %.300s", narrowBound, got, want)
	}
	differ := 0
	sp := inf.Spatial[0]
	g := sp.GridShape
	for c := range g[0] * g[1] * g[2] {
		path := fmt.Sprintf("/ng/%s/annotations/%s/%d_%d_%d", st.Name(), sp.Key, c%g[0], c/g[0]%g[1], c/(g[0]*g[1]))
		_, w := apitest.Get(t, wide, path)
		_, got := apitest.Get(t, narrow, path)
		_, want := apitest.Get(t, alone, path)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes beside the default's server, %d alone", path, len(got), len(want))
		}
		if !bytes.Equal(w, want) {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("no cell differs between the two bounds: the test cannot tell")
	}
	// A skeleton kept by the default's server is over the narrow one's
	// bound: refused, as it is alone.
	_, wideSk := newServer(t, api.Options{Stores: stores, Cache: ch})
	_, narrowSk := newServer(t, api.Options{Stores: stores, Cache: ch, MaxVertices: 2})
	const skel = "/ng/skeleton/skeletons/1"
	apitest.MustGet(t, wideSk, skel)
	if resp, body := apitest.Get(t, narrowSk, skel); resp.StatusCode != http.StatusRequestEntityTooLarge || !bytes.Contains(body, []byte("more than this server's 2 per response")) {
		t.Errorf("%s from a server of --max-vertices 2 after the default's kept it: %d %.200s, want its 413", skel, resp.StatusCode, body)
	}

	// The shard byte scale.
	shardServer := func(c *cache.Cache, target int64) *httptest.Server {
		o := neuroglancer.Options{Sharded: neuroglancer.ShardAlways, Cache: c}
		o.Store = func(r *http.Request) (*zvf.Store, error) { return storeNamed(t, stores, chi.URLParam(r, "store")), nil }
		return serveRoutes(t, o, func(o neuroglancer.Options) *neuroglancer.Server { return neuroglancer.NewSmallShards(o, target) })
	}
	shared := cache.New(64 << 20)
	big, small := shardServer(shared, 1<<20), shardServer(shared, 1<<10)
	smallAlone := shardServer(cache.New(64<<20), 1<<10)
	bigInfo := apitest.MustGet(t, big, info)
	if got, want := apitest.MustGet(t, small, info), apitest.MustGet(t, smallAlone, info); !bytes.Equal(got, want) || bytes.Equal(want, bigInfo) {
		t.Errorf("shards aimed at 1 KiB beside a server aiming at 1 MiB on one cache: info %.300s\nwant (alone) %.300s", got, want)
	}
}
