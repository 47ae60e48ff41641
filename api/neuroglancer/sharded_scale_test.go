package neuroglancer_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/api/neuroglancer/sharding/shardingtest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// TestShardedByIDAtScale serves 200,000 points with shards aimed at 256
// KiB and reads every shard file of by_id with the independent reader:
// every id 0 … n−1 is found, in the shard and minishard the spec places
// it, and nothing else is there; minishards hold about the target number
// of keys and shards about the target bytes.
func TestShardedByIDAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 200,000 points")
	}
	t.Parallel()
	const n = 200_000
	const target = 256 << 10
	ctx := context.Background()
	w, err := synth.Points(ctx, n, 3, writer.Codec(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	st, err := zvf.Open(ctx, storage.Sub(w, "points"), zvf.Options{Name: "scale", Cache: cache.New(64 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	o := neuroglancer.Options{Sharded: neuroglancer.ShardAlways, Cache: cache.New(256 << 20)}
	o.Store = func(*http.Request) (*zvf.Store, error) { return st, nil }
	ts := serveRoutes(t, o, func(o neuroglancer.Options) *neuroglancer.Server { return neuroglancer.NewSmallShards(o, target) })

	var info struct {
		ByID struct {
			Key      string          `json:"key"`
			Sharding json.RawMessage `json:"sharding"`
		} `json:"by_id"`
	}
	if err := json.Unmarshal(apitest.MustGet(t, ts, "/ng/scale/annotations/info"), &info); err != nil {
		t.Fatal(err)
	}
	spec, err := shardingtest.ParseSpec(info.ByID.Sharding)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("by_id sharding %s", info.ByID.Sharding)
	files := map[string][]byte{}
	total := 0
	for shard := range uint64(1) << spec.ShardBits {
		name := fmt.Sprintf("%0*x.shard", int(spec.ShardBits+3)/4, shard)
		resp, body := apitest.Get(t, ts, "/ng/scale/annotations/"+info.ByID.Key+"/"+name)
		switch resp.StatusCode {
		case http.StatusOK:
		case http.StatusNotFound:
			continue
		default:
			t.Fatalf("%s: %d %.200s", name, resp.StatusCode, body)
		}
		files[name] = body
		if len(body) > 2*target+int(spec.IndexEnd()) {
			t.Errorf("%s holds %d bytes, more than twice the %d aimed at", name, len(body), target)
		}
		for m := range uint64(1) << spec.MinishardBits {
			lo, hi := binary.LittleEndian.Uint64(body[16*m:]), binary.LittleEndian.Uint64(body[16*m+8:])
			if lo == hi {
				continue
			}
			es, err := spec.Minishard(body[spec.IndexEnd()+lo : spec.IndexEnd()+hi])
			if err != nil {
				t.Fatalf("%s minishard %d: %v", name, m, err)
			}
			if len(es) > 2*128 {
				t.Errorf("%s minishard %d holds %d keys", name, m, len(es))
			}
			for _, e := range es {
				s, file, mini := spec.Locate(e.Key)
				if file != name || mini != m || s != shard || e.Key >= n {
					t.Fatalf("%s minishard %d holds key %d, which the spec places in %s minishard %d", name, m, e.Key, file, mini)
				}
			}
			total += len(es)
		}
	}
	if total != n {
		t.Errorf("the shards hold %d keys, want %d", total, n)
	}
	for id := range uint64(n) {
		if _, ok, err := shardingtest.Get(info.ByID.Sharding, files, id); err != nil || !ok {
			t.Fatalf("id %d: found %v, %v", id, ok, err)
		}
	}
}
