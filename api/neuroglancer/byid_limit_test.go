package neuroglancer_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"

	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/api/neuroglancer/sharding"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestShardedByIDLeavesOutPolylinesOverTheBound: a polyline of more
// vertices than --max-vertices is refused by its by_id request (413), as
// its cells are, but the sharded by_id held it whole, so a server that
// refuses the polyline sent it anyway. The precomputed format has no
// per-entry error: the shard now leaves such a polyline out, and
// Neuroglancer finds no annotation of that id, as for a by_id 404. Every
// other polyline is in the shards with the bytes of its own by_id answer;
// a shard that would hold only polylines over the bound is a 404.
func TestShardedByIDLeavesOutPolylinesOverTheBound(t *testing.T) {
	t.Parallel()
	mem := zvftest.Store(t, "mem://")
	r := rand.New(rand.NewPCG(2, 20))
	lengths := []int{3, 30, 4, 5, 41, 6, 2, 25}
	const limit = 20
	pl := &writer.Polylines{}
	for _, n := range lengths {
		pl.Offsets = append(pl.Offsets, len(pl.Positions)/3)
		for range n {
			pl.Positions = append(pl.Positions, float32(r.Float64()*40), float32(r.Float64()*40), float32(r.Float64()*40))
		}
	}
	pl.Offsets = append(pl.Offsets, len(pl.Positions)/3)
	if _, err := writer.WritePolylines(t.Context(), mem, "s", pl, writer.Options{ChunkShape: []float64{20, 20, 20}}); err != nil {
		t.Fatal(err)
	}
	st := zvftest.OpenSub(t, mem, "s", cache.New(16<<20))
	plain := shardRoutes(t, st, neuroglancer.Options{Sharded: neuroglancer.ShardNever, MaxAnnotations: limit})
	sharded := shardRoutes(t, st, neuroglancer.Options{Sharded: neuroglancer.ShardAlways, MaxAnnotations: limit})
	var inf shardedInfo
	if err := json.Unmarshal(apitest.MustGet(t, sharded, "/ng/s/annotations/info"), &inf); err != nil {
		t.Fatal(err)
	}
	var spec sharding.Spec
	if err := json.Unmarshal(inf.ByID.Sharding, &spec); err != nil {
		t.Fatal(err)
	}
	var kept []uint64
	for id, n := range lengths {
		resp, body := apitest.Get(t, plain, fmt.Sprintf("/ng/s/annotations/%s/%d", inf.ByID.Key, id))
		if n > limit {
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Fatalf("by_id %d (%d vertices): %d %.200s, want 413", id, n, resp.StatusCode, body)
			}
		} else {
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("by_id %d (%d vertices): %d %.200s", id, n, resp.StatusCode, body)
			}
			kept = append(kept, uint64(id))
		}
		// The shard of this id: its entry is the by_id answer, or none.
		shard, _ := spec.Locate(uint64(id))
		resp, file := apitest.Get(t, sharded, fmt.Sprintf("/ng/s/annotations/%s/%s", inf.ByID.Key, spec.ShardFile(shard)))
		if resp.StatusCode == http.StatusNotFound && n > limit {
			continue // the shard holds no polyline within the bound
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("shard %d of by_id %d: %d %.200s", shard, id, resp.StatusCode, file)
		}
		sr, err := sharding.NewReader(spec, shard, bytes.NewReader(file), int64(len(file)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := sr.Get(uint64(id))
		switch {
		case n > limit && err == nil:
			t.Errorf("by_id %d (%d vertices, over the bound of %d) is in shard %d: %d bytes", id, n, limit, shard, len(got))
		case n <= limit && (err != nil || !bytes.Equal(got, body)):
			t.Errorf("by_id %d (%d vertices) in shard %d: %d bytes, %v; its by_id answer is %d bytes", id, n, shard, len(got), err, len(body))
		}
	}
	// The shards hold no other key.
	var all []uint64
	for n := range spec.NumShards() {
		resp, file := apitest.Get(t, sharded, fmt.Sprintf("/ng/s/annotations/%s/%s", inf.ByID.Key, spec.ShardFile(n)))
		if resp.StatusCode == http.StatusNotFound {
			continue
		}
		for _, e := range shardEntries(t, inf.ByID.Sharding, file) {
			all = append(all, e.Key)
		}
	}
	slices.Sort(all)
	if fmt.Sprint(all) != fmt.Sprint(kept) {
		t.Errorf("the by_id shards hold %v, want the polylines within the bound %v", all, kept)
	}
}
