package faultstore

import (
	"sync"
	"sync/atomic"
)

// rules is an ordered list of rules, shared by the calls they are tried on.
type rules[R any] struct {
	mu   sync.Mutex
	list []*R
}

func (rs *rules[R]) add(r *R) {
	rs.mu.Lock()
	rs.list = append(rs.list, r)
	rs.mu.Unlock()
}

func (rs *rules[R]) reset() {
	rs.mu.Lock()
	rs.list = nil
	rs.mu.Unlock()
}

// first is the first rule that applies, or nil. applies runs under the
// lock, so that counting matches is one step with finding them.
func (rs *rules[R]) first(applies func(*R) bool) *R {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, r := range rs.list {
		if applies(r) {
			return r
		}
	}
	return nil
}

// counter counts a rule's matches, for its Nth and Times.
type counter struct{ seen, used atomic.Int64 }

// fires counts a match and reports whether the rule applies to it: the
// nth match only (nth > 0), and at most times matches (times > 0).
func (c *counter) fires(nth, times int) bool {
	if n := c.seen.Add(1); nth > 0 && n != int64(nth) {
		return false
	}
	return times <= 0 || c.used.Add(1) <= int64(times)
}
