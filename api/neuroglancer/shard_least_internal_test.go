package neuroglancer

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
)

// TestLeastShardBytesIsTheBuilds: what the plan says a whole shard build
// holds, before reading (leastSpatialShard, leastByIDShard), is what the
// build holds, for every shard of every annotation source of the
// reference stores of each kind (up to 8 shards a source), but for points related to no object, whose by_id
// records are shorter than a related one's (the plan does not know which
// are): there it is a lower bound. A shard it puts over the bound is so.
// So it is for by_id under a --max-vertices bound, which leaves out the
// polylines over it.
func TestLeastShardBytesIsTheBuilds(t *testing.T) {
	ctx := context.Background()
	checked := 0
	for _, name := range []string{"points_pyramid", "quirk_points_objects_bins", "polylines", "graph", "skeleton"} {
		path := filepath.Join("../../testdata/zvf-reference", name+".zarrvectors")
		bs, err := blobstore.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = bs.Close() })
		st, err := zvf.Open(ctx, bs, zvf.Options{Name: name, Cache: cache.New(64 << 20)})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []kind{kindPoint, kindPolyline, kindLine} {
			p, err := buildPlan(ctx, st, k, 0)
			if err != nil || p.total == 0 {
				continue
			}
			sh := p.shardSpecs(1 << 12) // several shards a source
			check := func(what string, n int64, b *shardBuild, build func(context.Context, *shardBuild) error, exact bool) {
				if err := build(ctx, b); err != nil {
					t.Fatalf("%s %s: %v", st.Name(), what, err)
				}
				got := b.bytes.Load()
				if n > got || (exact && n != got) {
					t.Errorf("%s %s %s shard %d: the plan says %d bytes, the build holds %d", st.Name(), k.annotationType(), what, b.shard, n, got)
				}
				checked++
			}
			for s := range p.levels {
				for shard := range min(sh.spatial[s].NumShards(), 8) {
					b := &shardBuild{spec: sh.spatial[s], shard: shard, limit: math.MaxInt64, built: new(atomic.Int64)}
					n, err := p.leastSpatialShard(s, b)
					if err != nil {
						t.Fatal(err)
					}
					check("spatial", n, b, func(ctx context.Context, b *shardBuild) error { return p.spatialShard(ctx, s, 0, b) }, true)
				}
			}
			// A by_id shard leaves out the polylines over --max-vertices
			// (8 here, which some of the fixture's are over).
			for _, limit := range []int64{0, 8} {
				for shard := range min(sh.byID.NumShards(), 8) {
					b := &shardBuild{spec: sh.byID, shard: shard, limit: math.MaxInt64, built: new(atomic.Int64)}
					n, err := p.leastByIDShard(limit, b)
					if err != nil {
						t.Fatal(err)
					}
					check(fmt.Sprintf("by_id (--max-vertices %d)", limit), n, b, func(ctx context.Context, b *shardBuild) error { return p.byIDShard(ctx, limit, b) },
						!(k == kindPoint && p.relate))
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("%d shards checked", checked)
	}
	t.Logf("%d shards checked", checked)
}

// TestLeastSkeletonShardIsAtMostTheBuild: what the manifests say a whole
// skeleton shard build holds, before building it (leastSkeletonShard),
// is at most what the build holds (its edges count nothing), and more
// than nothing, for every shard of the reference skeleton and graph
// stores, so a shard it puts over the bound is so.
func TestLeastSkeletonShardIsAtMostTheBuild(t *testing.T) {
	ctx := context.Background()
	checked := 0
	for _, name := range []string{"skeleton", "graph"} {
		bs, err := blobstore.Open(ctx, filepath.Join("../../testdata/zvf-reference", name+".zarrvectors"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = bs.Close() })
		st, err := zvf.Open(ctx, bs, zvf.Options{Name: name, Cache: cache.New(64 << 20)})
		if err != nil {
			t.Fatal(err)
		}
		l0, err := st.Level(0)
		if err != nil {
			t.Fatal(err)
		}
		s := New(Options{Sharded: ShardAlways})
		s.shardScale = 1 << 12 // several shards
		sp := newSkeletonSpec(st, l0)
		spec := s.skeletonShards(l0, sp)
		for shard := range min(spec.NumShards(), 8) {
			b := &shardBuild{spec: *spec, shard: shard, limit: math.MaxInt64, built: new(atomic.Int64)}
			least, err := s.leastSkeletonShard(ctx, st, l0, sp, b)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.skeletonShard(ctx, st, l0, sp, b); err != nil {
				t.Fatal(err)
			}
			if got := b.bytes.Load(); least > got || got > 0 && least == 0 {
				t.Errorf("%s skeleton shard %d: the manifests say at least %d bytes, the build holds %d", name, shard, least, got)
			}
			checked++
		}
	}
	if checked < 4 {
		t.Fatalf("%d shards checked", checked)
	}
}
