// Package suggest finds the name someone probably meant when they
// mistyped one (a query parameter, a command), so that an error can say
// "did you mean …?".
package suggest

// maxLen bounds the names compared (in bytes): a name from a request is
// untrusted, and the distance costs the product of the two lengths.
const maxLen = 64

// Nearest is the first of names within two edits of s, the nearest if
// several are; "" when none is that near.
func Nearest(s string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := Distance(s, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// Distance is the Damerau–Levenshtein distance between a and b in
// characters, with adjacent transpositions (so "inspcet" is one edit from
// "inspect"); maxLen for a string longer than maxLen bytes.
func Distance(a, b string) int {
	if len(a) > maxLen || len(b) > maxLen {
		return maxLen
	}
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
