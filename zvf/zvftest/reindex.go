package zvftest

// Reindex is what a filter leaves of connectivity in (edges or faces, as
// vertex indices): the elements whose every vertex is kept, each index
// replaced by newIdx's (-1 for a vertex not kept), in the order of in.
func Reindex(in [][]int64, newIdx []int64) [][]int64 {
	var out [][]int64
next:
	for _, c := range in {
		n := make([]int64, len(c))
		for i, v := range c {
			if n[i] = newIdx[v]; n[i] < 0 {
				continue next
			}
		}
		out = append(out, n)
	}
	return out
}
