package neuroglancer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// readCounter counts the bytes read from a store.
type readCounter struct {
	storage.Store
	n atomic.Int64
}

func (c *readCounter) Get(ctx context.Context, key string, o storage.ReadOptions) (storage.Object, error) {
	obj, err := c.Store.Get(ctx, key, o)
	c.n.Add(int64(len(obj.Data)))
	return obj, err
}

// TestShardOverTheBoundDecidedBeforeReading: the first read of a shard
// over --ng-max-shard-bytes started a whole build, which read the store
// and held up to the bound before it stopped; the layout was then built
// by a second pass over the shard. The plan knows what each cell and
// by_id record holds, so the server now sees the shard is over the bound
// before reading it: the first read (its 16-byte index) reads the store
// once over, as much as one whole build of the shard on a server without
// the bound, and builds each chunk once (to measure it).
func TestShardOverTheBoundDecidedBeforeReading(t *testing.T) {
	t.Parallel()
	mem := zvftest.Store(t, "mem://")
	writeBinnedPoints(t, mem, 20_000, 5, 6)
	var inf shardedInfo
	for _, path := range []string{"/ng/p/annotations/by_id/0.shard", "/ng/p/annotations/spatial0/0.shard"} {
		// serve opens the store anew, without a cache, so that every
		// build reads the store.
		serve := func(bound int64) (*readCounter, *neuroglancer.Server, *httptest.Server) {
			rc := &readCounter{Store: storage.Sub(mem, "p")}
			st, err := zvf.Open(context.Background(), rc, zvf.Options{Name: "p"})
			if err != nil {
				t.Fatal(err)
			}
			var srv *neuroglancer.Server
			ts := serveRoutes(t, neuroglancer.Options{Sharded: neuroglancer.ShardAlways, MaxShardBytes: bound,
				Store: func(*http.Request) (*zvf.Store, error) { return st, nil }},
				func(o neuroglancer.Options) *neuroglancer.Server { srv = neuroglancer.New(o); return srv })
			if err := json.Unmarshal(apitest.MustGet(t, ts, "/ng/p/annotations/info"), &inf); err != nil { // the plan's reads
				t.Fatal(err)
			}
			rc.n.Store(0)
			return rc, srv, ts
		}
		rc0, _, ts0 := serve(0)
		whole := apitest.MustGet(t, ts0, path)
		once := rc0.n.Load()

		rc, srv, ts := serve(1000)
		resp, body := apitest.Get(t, ts, path, "Range", "bytes=0-15")
		if resp.StatusCode != http.StatusPartialContent || string(body) != string(whole[:16]) {
			t.Fatalf("%s: the index read: %d %.200q", path, resp.StatusCode, body)
		}
		read, built := rc.n.Load(), srv.ChunksBuilt()
		spec := inf.ByID.Sharding
		if strings.Contains(path, "spatial") {
			spec = inf.Spatial[0].Sharding
		}
		entries := len(shardEntries(t, spec, whole))
		t.Logf("%s: %d bytes, %d chunks; its first read over the bound read %d bytes of the store and built %d chunks; a whole build reads %d",
			path, len(whole), entries, read, built, once)
		if read > once || built != int64(entries) {
			t.Errorf("%s: the first read of a shard over the bound read %d bytes of the store and built %d chunks, want at most %d bytes (one whole build) and %d chunks (each measured once)",
				path, read, built, once, entries)
		}
	}
}

// TestSkeletonShardOverTheBoundDecidedBeforeBuilding: a skeleton shard
// over --ng-max-shard-bytes learnt so only by building it, which read and
// encoded skeletons until the bound, and then measured every skeleton
// again for the shard's layout. The objects' manifests say how many
// vertices each skeleton has, so the server now sees the shard is over
// the bound before building it: its first read (the 16-byte index)
// builds each skeleton of the shard once, to measure it.
func TestSkeletonShardOverTheBoundDecidedBeforeBuilding(t *testing.T) {
	t.Parallel()
	st := storeNamed(t, fixtureStores(t), "skeleton")
	var inf struct{ Sharding json.RawMessage }
	whole := shardRoutes(t, st, neuroglancer.Options{Sharded: neuroglancer.ShardAlways})
	if err := json.Unmarshal(apitest.MustGet(t, whole, "/ng/skeleton/skeletons/info"), &inf); err != nil {
		t.Fatal(err)
	}
	var srv *neuroglancer.Server
	ts := serveRoutes(t, neuroglancer.Options{Sharded: neuroglancer.ShardAlways, MaxShardBytes: 2000,
		Store: func(*http.Request) (*zvf.Store, error) { return st, nil }},
		func(o neuroglancer.Options) *neuroglancer.Server { srv = neuroglancer.New(o); return srv })
	checked := 0
	for n := 0; n < 4; n++ {
		path := fmt.Sprintf("/ng/skeleton/skeletons/%d.shard", n)
		resp, all := apitest.Get(t, whole, path)
		if resp.StatusCode == http.StatusNotFound {
			continue
		}
		entries := len(shardEntries(t, inf.Sharding, all))
		before := srv.ChunksBuilt()
		resp, body := apitest.Get(t, ts, path, "Range", "bytes=0-15")
		if resp.StatusCode != http.StatusPartialContent || string(body) != string(all[:16]) {
			t.Fatalf("%s: the index read: %d %.200q", path, resp.StatusCode, body)
		}
		if built := srv.ChunksBuilt() - before; built != int64(entries) || len(all) <= 2000 {
			t.Errorf("%s (%d bytes, %d skeletons): its first read over a bound of 2000 bytes built %d skeletons, want each once", path, len(all), entries, built)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no skeleton shard checked")
	}
}
