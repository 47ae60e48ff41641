package neuroglancer_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/api/neuroglancer/sharding/shardingtest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// gridPolylines is a store named "scale" of n three-vertex polylines, one
// every 10 units on a 100 × 100 grid of layers, read through a cache of
// cacheBytes.
func gridPolylines(t testing.TB, n int, cacheBytes int64) *zvf.Store {
	t.Helper()
	const per = 3
	ctx := context.Background()
	pos := make([]float32, 0, 3*n*per)
	offsets := make([]int, 0, n+1)
	offsets = append(offsets, 0)
	for l := range n {
		x, y, z := float32(l%100)*10, float32(l/100%100)*10, float32(l/10000)*10
		for v := range per {
			pos = append(pos, x+float32(v), y+float32(v)/2, z+1)
		}
		offsets = append(offsets, (l+1)*per)
	}
	w := zvftest.Store(t, "mem://")
	if _, err := writer.WritePolylines(ctx, w, "lines", &writer.Polylines{Positions: pos, Offsets: offsets},
		writer.Options{ChunkShape: []float64{250, 250, 250}, BinShape: []float64{50, 50, 50}}); err != nil {
		t.Fatal(err)
	}
	st, err := zvf.Open(ctx, storage.Sub(w, "lines"), zvf.Options{Name: "scale", Cache: cache.New(cacheBytes)})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// scalePoints is a store of n synthetic points (zvf/synth, from seed),
// for the tests at scale (skipped in -short: writing them takes a while);
// the test runs in parallel.
func scalePoints(t *testing.T, n int, seed uint64) *zvf.Store {
	t.Helper()
	if testing.Short() {
		t.Skipf("writes %d points", n)
	}
	t.Parallel()
	ctx := context.Background()
	w, err := synth.Points(ctx, n, seed, writer.Codec(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	st, err := zvf.Open(ctx, storage.Sub(w, "points"), zvf.Options{Name: "scale", Cache: cache.New(64 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestShardedByIDAtScale serves 200,000 points with shards aimed at 256
// KiB and reads every shard file of by_id with the independent reader:
// every id 0 … n−1 is found, in the shard and minishard the spec places
// it, and nothing else is there; minishards hold about the target number
// of keys and shards about the target bytes.
func TestShardedByIDAtScale(t *testing.T) {
	const n = 200_000
	const target = 256 << 10
	st := scalePoints(t, n, 3)
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

	// Every cell of every spatial level, by its Morton code, equals the
	// unsharded cell; an empty cell is in no shard.
	var sinfo shardedInfo
	if err := json.Unmarshal(apitest.MustGet(t, ts, "/ng/scale/annotations/info"), &sinfo); err != nil {
		t.Fatal(err)
	}
	plain := shardRoutes(t, st, neuroglancer.Options{Sharded: neuroglancer.ShardNever, Cache: cache.New(256 << 20)})
	cells := 0
	for _, sp := range sinfo.Spatial {
		ss, err := shardingtest.ParseSpec(sp.Sharding)
		if err != nil {
			t.Fatal(err)
		}
		files := map[string][]byte{}
		for shard := range uint64(1) << ss.ShardBits {
			name := fmt.Sprintf("%0*x.shard", int(ss.ShardBits+3)/4, shard)
			if resp, body := apitest.Get(t, ts, "/ng/scale/annotations/"+sp.Key+"/"+name); resp.StatusCode == http.StatusOK {
				files[name] = body
			}
		}
		g := sp.GridShape
		for i := range g[0] {
			for j := range g[1] {
				for k := range g[2] {
					want := apitest.MustGet(t, plain, fmt.Sprintf("/ng/scale/annotations/%s/%d_%d_%d", sp.Key, i, j, k))
					got, ok, err := shardingtest.Get(sp.Sharding, files, zOrder([]int{i, j, k}, g))
					empty := binary.LittleEndian.Uint64(want) == 0
					if err != nil || ok == empty || (ok && !bytes.Equal(got, want)) {
						t.Fatalf("%s cell %d_%d_%d: in a shard %v (%d bytes), %v; unsharded %d bytes", sp.Key, i, j, k, ok, len(got), err, len(want))
					}
					cells++
				}
			}
		}
		t.Logf("%s: %s, %d shard files", sp.Key, sp.Sharding, len(files))
	}
	t.Logf("%d cells", cells)
}

// TestSpatialIndexAtScale: 200,000 points in a three-level pyramid; every
// cell of every spatial level is read (unsharded) and every point id is in
// exactly one cell of one level, each level's cells hold what the info's
// counts say and no cell more than its level's limit.
func TestSpatialIndexAtScale(t *testing.T) {
	const n = 200_000
	st := scalePoints(t, n, 4)
	o := neuroglancer.Options{Sharded: neuroglancer.ShardNever, Cache: cache.New(256 << 20)}
	o.Store = func(*http.Request) (*zvf.Store, error) { return st, nil }
	ts := serveRoutes(t, o, neuroglancer.New)
	var info struct {
		Spatial []struct {
			Key       string  `json:"key"`
			GridShape []int64 `json:"grid_shape"`
			Limit     int64   `json:"limit"`
		} `json:"spatial"`
		Zvfserve struct {
			Levels []struct {
				Annotations int64 `json:"annotations"`
			} `json:"spatial_levels"`
		} `json:"zvfserve"`
	}
	raw := apitest.MustGet(t, ts, "/ng/scale/annotations/info")
	if err := json.Unmarshal(raw, &info); err != nil {
		t.Fatal(err)
	}
	if len(info.Spatial) < 2 {
		t.Fatalf("%d spatial levels: %s", len(info.Spatial), raw)
	}
	seen := make([]int8, n)
	for l, sp := range info.Spatial {
		var inLevel int64
		for i := range sp.GridShape[0] {
			for j := range sp.GridShape[1] {
				for k := range sp.GridShape[2] {
					body := apitest.MustGet(t, ts, fmt.Sprintf("/ng/scale/annotations/%s/%d_%d_%d", sp.Key, i, j, k))
					if len(body) < 8 {
						t.Fatalf("%s cell %d_%d_%d: %d bytes", sp.Key, i, j, k, len(body))
					}
					c := binary.LittleEndian.Uint64(body)
					if int64(c) > sp.Limit {
						t.Errorf("%s cell %d_%d_%d holds %d, over the limit %d", sp.Key, i, j, k, c, sp.Limit)
					}
					ids := body[len(body)-8*int(c):]
					for x := range int(c) {
						id := binary.LittleEndian.Uint64(ids[8*x:])
						if id >= n {
							t.Fatalf("%s: id %d", sp.Key, id)
						}
						seen[id]++
					}
					inLevel += int64(c)
				}
			}
		}
		if l < len(info.Zvfserve.Levels) && info.Zvfserve.Levels[l].Annotations != inLevel {
			t.Errorf("%s: cells hold %d, the info says %d", sp.Key, inLevel, info.Zvfserve.Levels[l].Annotations)
		}
		t.Logf("%s: %d annotations, grid %v, limit %d", sp.Key, inLevel, sp.GridShape, sp.Limit)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("point %d is in %d cells", id, c)
		}
	}
}

// TestShardedSkeletonsAtScale: 100,000 polylines served as sharded
// skeletons with shards aimed at 256 KiB; every object's skeleton is found
// through the independent reader, equal to the unsharded answer.
func TestShardedSkeletonsAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 100,000 polylines")
	}
	t.Parallel()
	const lines = 100_000
	st := gridPolylines(t, lines, 256<<20)
	serve := func(mode neuroglancer.ShardMode) *httptest.Server {
		o := neuroglancer.Options{Sharded: mode, Cache: cache.New(256 << 20)}
		o.Store = func(*http.Request) (*zvf.Store, error) { return st, nil }
		return serveRoutes(t, o, func(o neuroglancer.Options) *neuroglancer.Server { return neuroglancer.NewSmallShards(o, 256<<10) })
	}
	sharded, plain := serve(neuroglancer.ShardAlways), serve(neuroglancer.ShardNever)
	var info struct {
		Sharding json.RawMessage `json:"sharding"`
	}
	if err := json.Unmarshal(apitest.MustGet(t, sharded, "/ng/scale/skeletons/info"), &info); err != nil {
		t.Fatal(err)
	}
	spec, err := shardingtest.ParseSpec(info.Sharding)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("skeleton sharding %s", info.Sharding)
	files := map[string][]byte{}
	start := time.Now()
	for shard := range uint64(1) << spec.ShardBits {
		name := fmt.Sprintf("%0*x.shard", int(spec.ShardBits+3)/4, shard)
		resp, body := apitest.Get(t, sharded, "/ng/scale/skeletons/"+name)
		switch resp.StatusCode {
		case http.StatusOK:
			files[name] = body
		case http.StatusNotFound:
		default:
			t.Fatalf("%s: %d %.200s", name, resp.StatusCode, body)
		}
	}
	t.Logf("%d shard files in %v", len(files), time.Since(start))
	for id := range uint64(lines) {
		got, ok, err := shardingtest.Get(info.Sharding, files, id)
		if err != nil || !ok {
			t.Fatalf("skeleton %d: found %v, %v", id, ok, err)
		}
		if id%997 == 0 {
			if want := apitest.MustGet(t, plain, fmt.Sprintf("/ng/scale/skeletons/%d", id)); !bytes.Equal(got, want) {
				t.Fatalf("skeleton %d: the shard's %d bytes differ from the unsharded %d", id, len(got), len(want))
			}
		}
	}
}
