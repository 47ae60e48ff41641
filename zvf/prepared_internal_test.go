package zvf

import "testing"

// TestNextChunksKeyPos: the key-index → candidate table finds a
// neighbour among the candidates (and none outside them), and is all -1
// again after each answer, also when a later answer's level has fewer or
// more keys — a stale entry would join an edge to the wrong chunk.
func TestNextChunksKeyPos(t *testing.T) {
	var n nextChunks
	for _, tc := range []struct {
		keys int
		cand []int32
	}{
		{10, []int32{2, 5, 7}},
		{4, []int32{0, 3}},
		{16, []int32{1, 9, 15}},
		{10, nil},
	} {
		ai := &answerIndex{l: &Level{keys: make([]Key, tc.keys)}, cand: tc.cand, byPos: make([]*rankedChunk, len(tc.cand))}
		for p := range ai.byPos {
			ai.byPos[p] = &rankedChunk{pos: p, cv: &chunkVerts{}}
		}
		ci := &chunkInverse{nextChunks: make([]string, tc.keys+1), nextKey: make([]int32, tc.keys+1)}
		for k := range ci.nextKey {
			ci.nextKey[k] = int32(k)
		}
		ci.nextKey[tc.keys] = -1 // a neighbour that is not one of the level's keys
		n.index(ai)
		n.reset(ai, ci)
		for k := range ci.nextKey {
			d, _ := n.of(int32(k))
			want := -1
			for p, ki := range tc.cand {
				if int(ki) == k {
					want = p
				}
			}
			switch {
			case want < 0 && d != nil:
				t.Errorf("keys %d: key %d is no candidate, found at position %d", tc.keys, k, d.pos)
			case want >= 0 && (d == nil || d.pos != want):
				t.Errorf("keys %d: key %d: got %v, want position %d", tc.keys, k, d, want)
			}
		}
		n.release()
		n.unindex(ai)
		for ki, p := range n.keyPos {
			if p != -1 {
				t.Fatalf("after an answer over %d keys: keyPos[%d] = %d, want -1", tc.keys, ki, p)
			}
		}
	}
}
