package neuroglancer_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

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
