package neuroglancer

import (
	"testing"

	"github.com/zvfserve/zvfserve/api/neuroglancer/sharding"
)

// TestDenseSpecRuns: for dense ids 0..n−1, every id's shard under
// denseSpec is the one whose idRange holds it, the ids fit the shards,
// and the bits stay within the format's limits, from one id to 2^40 (ids
// checked at the edges of each run).
func TestDenseSpecRuns(t *testing.T) {
	for _, tc := range []struct{ n, bytes int64 }{
		{1, 10}, {2, 10}, {127, 4 << 10}, {128, 1 << 20}, {129, 1 << 20}, {20_000, 600 << 10},
		{20_000, 40 << 30}, {1_000_000, 40 << 20}, {1_000_003, 3 << 30}, {1 << 40, 1 << 50},
	} {
		sp := denseSpec(tc.n, tc.bytes)
		if err := sp.Validate(); err != nil || sp.Hash != sharding.Identity {
			t.Fatalf("n %d: %+v: %v", tc.n, sp, err)
		}
		run := int64(1) << (sp.PreshiftBits + sp.MinishardBits)
		if shards := (tc.n + run - 1) / run; shards > int64(sp.NumShards()) {
			t.Fatalf("n %d: %+v: %d ids need %d shards", tc.n, sp, tc.n, shards)
		}
		for shard := range min(sp.NumShards(), 64) {
			b := &shardBuild{spec: sp, shard: shard}
			lo, hi := b.idRange(tc.n)
			for _, id := range []int64{lo, lo + 1, (lo + hi) / 2, hi - 2, hi - 1} {
				if id < lo || id >= hi {
					continue
				}
				if got, _ := sp.Locate(uint64(id)); got != shard || !b.wants(uint64(id)) {
					t.Fatalf("n %d %+v: id %d in shard %d, idRange of shard %d is [%d, %d)", tc.n, sp, id, got, shard, lo, hi)
				}
			}
			if hi < tc.n {
				if got, _ := sp.Locate(uint64(hi)); got == shard {
					t.Fatalf("n %d %+v: id %d past shard %d's run [%d, %d) is in it", tc.n, sp, hi, shard, lo, hi)
				}
			}
		}
	}
}

// TestMortonCode: Neuroglancer's compressed Morton code, on grids whose
// axes need different numbers of bits (worked by hand).
func TestMortonCode(t *testing.T) {
	for _, tc := range []struct {
		cell string
		grid []int64
		want uint64
	}{
		{"0_0_0", []int64{1, 1, 1}, 0},
		{"1_0_0", []int64{2, 2, 2}, 0b001},
		{"0_1_0", []int64{2, 2, 2}, 0b010},
		{"1_1_1", []int64{2, 2, 2}, 0b111},
		// x needs 3 bits, y 1, z 2: bits x0 y0 z0 x1 z1 x2.
		{"5_1_2", []int64{5, 2, 3}, 0b110011},
		{"4_0_0", []int64{8, 1, 1}, 0b100},
		{"0_0_3", []int64{1, 1, 4}, 0b11},
	} {
		got, err := mortonCode(tc.cell, tc.grid)
		if err != nil || got != tc.want {
			t.Errorf("%s over %v: %b %v, want %b", tc.cell, tc.grid, got, err, tc.want)
		}
	}
	for _, bad := range []string{"1_2", "a_0_0", "-1_0_0"} {
		if _, err := mortonCode(bad, []int64{4, 4, 4}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestDenseSpecShardsStayNearTarget: a dense by_id shard is a run of
// 2^(preshift+minishard_bits) ids, and its records must stay within
// sharding.TargetShardBytes, as ChooseBits promises of every shard, while
// shard_bits has room; its minishards hold at most TargetMinishardKeys
// ids. Runs of a power of two ids over counts just past one (2^17 + 1 ids
// in two shards put all but one id in the first) filled a shard to twice
// the target.
func TestDenseSpecShardsStayNearTarget(t *testing.T) {
	for _, tc := range []struct{ n, bytes int64 }{
		{1<<17 + 1, 40 << 20}, {1<<20 + 1, 100 << 20}, {3_000_000, 500 << 20}, {1_000_000, 40 << 20},
		{1<<17 + 1, 20 << 20}, {5, 1 << 30}, {1 << 30, 1 << 40}, {123_456_789, 7 << 30},
	} {
		sp := denseSpec(tc.n, tc.bytes)
		if err := sp.Validate(); err != nil {
			t.Fatalf("n %d: %v", tc.n, err)
		}
		run := int64(1) << (sp.PreshiftBits + sp.MinishardBits)
		if shards := (tc.n + run - 1) / run; shards > int64(sp.NumShards()) {
			t.Fatalf("n %d %+v: %d ids need %d shards", tc.n, sp, tc.n, shards)
		}
		fullest := float64(min(run, tc.n)) * float64(tc.bytes) / float64(tc.n)
		if sp.ShardBits < sharding.MaxShardBits && fullest > max(sharding.TargetShardBytes, float64(tc.bytes)/float64(tc.n)) {
			t.Errorf("n %d, %d bytes: %+v puts %.0f bytes in a shard, over the %d aimed at", tc.n, tc.bytes, sp, fullest, sharding.TargetShardBytes)
		}
		if keys := int64(1) << sp.PreshiftBits; keys > sharding.TargetMinishardKeys && sp.MinishardBits < sharding.MaxMinishardBits {
			t.Errorf("n %d: %+v: minishards of %d ids", tc.n, sp, keys)
		}
	}
}
