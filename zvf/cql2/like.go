package cql2

import (
	"slices"
	"unicode/utf8"
)

type strOp uint8

const (
	spIn   strOp = iota // one of vals (sorted)
	spLt                // < lit
	spLe                // <= lit
	spGt                // > lit
	spGe                // >= lit
	spLike              // like
	spNull              // null (categorical only: the null code or a code without a label)
)

func strOpOf(op CompareOp) strOp {
	switch op {
	case Lt:
		return spLt
	case Le:
		return spLe
	case Gt:
		return spGt
	}
	return spGe
}

// strPred is a predicate on a non-null string (a label, or a string
// attribute's value); strings order by bytes, which is code point order.
type strPred struct {
	op   strOp
	vals []string
	lit  string
	like *likePattern
}

func (p *strPred) match(s string) bool {
	switch p.op {
	case spIn:
		if len(p.vals) <= 8 {
			return slices.Contains(p.vals, s)
		}
		_, found := slices.BinarySearch(p.vals, s)
		return found
	case spLt:
		return s < p.lit
	case spLe:
		return s <= p.lit
	case spGt:
		return s > p.lit
	case spGe:
		return s >= p.lit
	case spLike:
		return p.like.match(s)
	}
	return false
}

// likePattern is a LIKE pattern cut at its % wildcards into segments, each
// a run of characters to match in turn, where -1 stands for _ (any one
// character). A match is: the first segment at the start, the last at the
// end, and the others in order in between, each at its leftmost place
// (taking the leftmost place never loses a match, since what follows
// cannot start earlier). The cost is bounded by the length of the string
// times the length of the pattern, with no backtracking across segments.
type likePattern struct {
	segs [][]rune // more than one: the first is anchored at the start, the last at the end
}

// compileLike compiles a pattern checkPattern accepted.
func compileLike(pat string) *likePattern {
	p := &likePattern{}
	seg := []rune{}
	for i := 0; i < len(pat); {
		r, n := utf8.DecodeRuneInString(pat[i:])
		i += n
		switch r {
		case '%':
			p.segs = append(p.segs, seg)
			seg = []rune{}
			continue
		case '_':
			r = -1
		case '\\':
			r, n = utf8.DecodeRuneInString(pat[i:])
			i += n
		}
		seg = append(seg, r)
	}
	p.segs = append(p.segs, seg)
	// Empty segments between %s constrain nothing; keep the first and last
	// (the anchors).
	if len(p.segs) > 2 {
		mid := p.segs[1 : len(p.segs)-1]
		kept := p.segs[:1]
		for _, s := range mid {
			if len(s) > 0 {
				kept = append(kept, s)
			}
		}
		p.segs = append(kept, p.segs[len(p.segs)-1])
	}
	return p
}

// matchAt reports whether seg matches s from its start, and the bytes it
// took.
func matchAt(s string, seg []rune) (int, bool) {
	i := 0
	for _, want := range seg {
		if i >= len(s) {
			return 0, false
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if want >= 0 && r != want {
			return 0, false
		}
		i += n
	}
	return i, true
}

func (p *likePattern) match(s string) bool {
	if len(p.segs) == 1 {
		n, ok := matchAt(s, p.segs[0])
		return ok && n == len(s)
	}
	first, last := p.segs[0], p.segs[len(p.segs)-1]
	start, ok := matchAt(s, first)
	if !ok {
		return false
	}
	// The last segment takes the last len(last) characters.
	end := len(s)
	for range last {
		if end <= start {
			return false
		}
		_, n := utf8.DecodeLastRuneInString(s[:end])
		end -= n
	}
	if n, ok := matchAt(s[end:], last); !ok || end+n != len(s) {
		return false
	}
	rest := s[start:end]
	for _, seg := range p.segs[1 : len(p.segs)-1] {
		found := false
		for i := 0; i <= len(rest); {
			if n, ok := matchAt(rest[i:], seg); ok {
				rest, found = rest[i+n:], true
				break
			}
			if i == len(rest) {
				break
			}
			_, n := utf8.DecodeRuneInString(rest[i:])
			i += n
		}
		if !found {
			return false
		}
	}
	return true
}
