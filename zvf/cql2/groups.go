package cql2

import "slices"

// Groups tells which groups objects belong to, at the level being read.
type Groups interface {
	// Member reports whether object id belongs to group g.
	Member(g, id int64) bool
	// Grouped reports whether object id belongs to any group.
	Grouped(id int64) bool
}

// GroupSets is Groups from lists of members.
type GroupSets struct {
	of map[int64][]int64 // object id → its groups, sorted
}

// NewGroupSets returns the Groups in which group g holds members[g].
func NewGroupSets(members map[int64][]int64) *GroupSets {
	s := &GroupSets{of: map[int64][]int64{}}
	for g, ids := range members {
		for _, id := range ids {
			s.of[id] = append(s.of[id], g)
		}
	}
	for id, gs := range s.of {
		slices.Sort(gs)
		s.of[id] = slices.Compact(gs)
	}
	return s
}

// Member reports whether object id is in group g.
func (s *GroupSets) Member(g, id int64) bool {
	_, ok := slices.BinarySearch(s.of[id], g)
	return ok
}

// Grouped reports whether object id is in any group.
func (s *GroupSets) Grouped(id int64) bool { return len(s.of[id]) > 0 }
