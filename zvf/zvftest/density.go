package zvftest

// DensityCell is the density rule by scanning, an oracle for density
// answers: the index (x fastest) of the cell of p in a grid of shape over
// the box min–max, on each axis the last cell whose lower boundary
// min + i·w the coordinate reaches.
func DensityCell(p, min, max []float64, shape []int) int {
	idx, stride := 0, 1
	for a, n := range shape {
		w := (max[a] - min[a]) / float64(n)
		c := 0
		for i := range n {
			if min[a]+float64(i)*w <= p[a] {
				c = i
			}
		}
		idx += c * stride
		stride *= n
	}
	return idx
}
