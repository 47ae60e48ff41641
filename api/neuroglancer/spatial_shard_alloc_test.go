package neuroglancer

import (
	"context"
	"testing"

	"github.com/zvfserve/zvfserve/api/neuroglancer/sharding"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// TestSpatialShardSelectionAllocates: a shard build picks its cells out of
// the level's by their Morton codes; that pass runs once per shard over
// every cell of the level, so it must not allocate per cell (it split and
// parsed each cell's name into new slices: three allocations a cell, for
// each of up to 1024 shards). Measured on shards no cell falls in, so
// only the selection runs.
func TestSpatialShardSelectionAllocates(t *testing.T) {
	ctx := context.Background()
	w, err := synth.PointsChunked(ctx, 20_000, 5, writer.Codec(0), 100)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	st, err := zvf.Open(ctx, storage.Sub(w, "points"), zvf.Options{Name: "cells"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := buildPlan(ctx, st, kindPoint, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := len(p.levels) - 1 // the finest level, of the most cells
	cells := len(p.levels[n].cells)
	if cells < 500 {
		t.Fatalf("%d cells", cells)
	}
	spec := sharding.Spec{Hash: sharding.Murmur, ShardBits: sharding.MaxShardBits, MinishardIndexEncoding: sharding.Gzip, DataEncoding: sharding.Gzip}
	used := map[uint64]bool{}
	for key := range p.levels[n].cells {
		code, err := mortonCode(key, p.levels[n].shape)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := spec.Locate(code)
		used[s] = true
	}
	empty := uint64(0)
	for used[empty] {
		empty++
	}
	if empty >= spec.NumShards() {
		t.Fatal("no empty shard")
	}
	allocs := testing.AllocsPerRun(5, func() {
		b := &shardBuild{spec: spec, shard: empty, limit: 1 << 30}
		if err := p.spatialShard(ctx, n, 0, b); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%d cells: %.0f allocations to find none in shard %d", cells, allocs, empty)
	if allocs > 50 {
		t.Errorf("finding the cells of one shard among %d allocates %.0f times", cells, allocs)
	}
}
