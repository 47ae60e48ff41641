package zvf

// DropSelections removes the level's cached filter selections (and their
// key tables), leaving its chunks and columns cached: the next filtered
// query evaluates its filter afresh, as a new filter does.
func (l *Level) DropSelections() int {
	if l.s.cache == nil {
		return 0
	}
	return l.s.cache.RemovePrefix(l.cacheKey("sel") + "\x00")
}
