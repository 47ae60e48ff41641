package neuroglancer

import "github.com/zvfserve/zvfserve/api/neuroglancer/sharding"

// NewSmallShards is New with shards aimed at about target bytes instead
// of sharding.TargetShardBytes, so that the tests' small stores span many
// shards and minishards.
func NewSmallShards(o Options, target int64) *Server {
	s := New(o)
	s.shardScale = max(1, sharding.TargetShardBytes/target)
	s.shapedBy = s.cacheVariant()
	return s
}

// ChunksBuilt is how many shard chunks s has built (whole shards,
// layouts, Range reads).
func (s *Server) ChunksBuilt() int64 { return s.chunksBuilt.Load() }
