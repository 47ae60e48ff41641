package ragged

import (
	"encoding/binary"
	"fmt"
)

// MaxPermWidth is the widest record a perm_idx can reorder: the Lehmer
// code of a permutation of n endpoints is below n!, and 20! is the largest
// factorial an int64 holds.
const MaxPermWidth = 20

// DecodeLinkCell decodes one link cell — a ZVF 0.9 links/<delta>/<offsets>
// cell, or a 0.6/0.7 links/0 blob: rows of width endpoint row indices,
// each preceded by a perm_idx column when hasPerm. A flat cell is the rows
// back to back; the others are an inline ragged blob whose groups are
// concatenated (zvf-0.9-format §3.4). It returns the rows in stored order
// (width values each, perm column removed) and, with hasPerm, sigma:
// width values a row, stored endpoint i being input endpoint sigma[i]
// (the caller places each stored endpoint before it restores the input
// order; see InputOrder).
func DecodeLinkCell(b []byte, flat bool, width int, hasPerm bool) (rows []int64, sigma []uint8, err error) {
	const what = "link cell"
	if width < 1 || width > 64 || (hasPerm && width > MaxPermWidth) {
		return nil, nil, bad(what, "link width %d (with perm_idx: %v)", width, hasPerm)
	}
	stored := width
	if hasPerm {
		stored++
	}
	var vals []int64
	if flat {
		if len(b)%(8*stored) != 0 {
			return nil, nil, bad(what, "%d bytes are not whole rows of %d int64", len(b), stored)
		}
		vals = ints(b)
	} else if vals, err = DecodeBlob(b, stored); err != nil {
		return nil, nil, err
	}
	n := len(vals) / stored
	if hasPerm {
		sigma = make([]uint8, n*width)
		var p [MaxPermWidth]int
		for r := 0; r < n; r++ {
			if err := Permutation(vals[r*stored], p[:width]); err != nil {
				return nil, nil, bad(what, "row %d: %v", r, err)
			}
			for i := range width {
				sigma[r*width+i] = uint8(p[i])
			}
			// Drop the perm column in place: row r moves to r*width.
			copy(vals[r*width:(r+1)*width], vals[r*stored+1:(r+1)*stored])
		}
		vals = vals[:n*width]
	}
	for i, v := range vals {
		if v < 0 {
			return nil, nil, bad(what, "row %d endpoint %d is %d", i/width, i%width, v)
		}
	}
	if vals == nil {
		vals = []int64{}
	}
	return vals, sigma, nil
}

// InputOrder returns rows (width values each, in stored order) with each
// row's endpoints in input order: input endpoint sigma[i] is stored
// endpoint i. Without sigma the rows are returned as they are.
func InputOrder(rows []int64, sigma []uint8, width int) []int64 {
	if sigma == nil {
		return rows
	}
	out := make([]int64, len(rows))
	for i, v := range rows {
		out[i-i%width+int(sigma[i])] = v
	}
	return out
}

// Permutation decodes a Lehmer code into sigma (a permutation of
// 0..len(sigma)-1): code = Σ idx_i · (n-1-i)!, idx_i being the position of
// sigma[i] among the values not used before it. 0 is the identity.
func Permutation(code int64, sigma []int) error {
	n := len(sigma)
	if n > MaxPermWidth {
		return fmt.Errorf("perm_idx over %d endpoints", n)
	}
	f := int64(1) // (n-1)!
	for i := 2; i < n; i++ {
		f *= int64(i)
	}
	if code < 0 || (n > 0 && code/f >= int64(n)) {
		return fmt.Errorf("perm_idx %d is not a permutation of %d endpoints", code, n)
	}
	var avail [MaxPermWidth]int
	for i := range n {
		avail[i] = i
	}
	left := n
	for i := range n {
		idx := int(code / f)
		code %= f
		sigma[i] = avail[idx]
		copy(avail[idx:left-1], avail[idx+1:left])
		left--
		if left > 0 {
			f /= int64(left)
		}
	}
	return nil
}

// LehmerCode is Permutation's inverse: the code of sigma.
func LehmerCode(sigma []int) int64 {
	var code int64
	for i, v := range sigma {
		smaller := 0 // values after i below sigma[i]: its rank among those unused
		for _, w := range sigma[i+1:] {
			if w < v {
				smaller++
			}
		}
		f := int64(1)
		for k := 2; k < len(sigma)-i; k++ {
			f *= int64(k)
		}
		code += int64(smaller) * f
	}
	return code
}

// EncodeLinkCell renders rows (width endpoints each, perms[i] the perm_idx
// of row i, or nil) as a link cell: flat, or a one-group ragged blob.
func EncodeLinkCell(rows []int64, width int, perms []int64, flat bool) ([]byte, error) {
	if width < 1 || len(rows)%width != 0 || (perms != nil && len(perms) != len(rows)/width) {
		return nil, fmt.Errorf("link cell: %d values, %d perms are not rows of %d", len(rows), len(perms), width)
	}
	stored := rows
	if perms != nil {
		stored = make([]int64, 0, len(rows)+len(perms))
		for r, p := range perms {
			stored = append(append(stored, p), rows[r*width:(r+1)*width]...)
		}
	}
	if !flat {
		w := width
		if perms != nil {
			w++
		}
		return EncodeBlob(stored, w)
	}
	out := make([]byte, 0, 8*len(stored))
	for _, v := range stored {
		out = binary.LittleEndian.AppendUint64(out, uint64(v))
	}
	return out, nil
}

// GroupsFromElements builds groups from ZVF 0.9's groups array: element g
// holds group g's member ids as little-endian int64, except a range group,
// whose element is empty and whose members are [start, stop) from the
// array's group_ranges attribute. Range members are not backed by bytes,
// so together they may number at most maxRange.
func GroupsFromElements(elems [][]byte, ranges map[int64][2]int64, maxRange int64) (*Groups, error) {
	const what = "groups"
	n := int64(0)
	for g, e := range elems {
		if len(e)%8 != 0 {
			return nil, bad(what, "group %d has %d bytes, not whole int64", g, len(e))
		}
		n += int64(len(e) / 8)
	}
	var fromRanges int64
	for g, r := range ranges {
		if g < 0 || g >= int64(len(elems)) {
			return nil, bad(what, "group_ranges names group %d of %d", g, len(elems))
		}
		if len(elems[g]) != 0 {
			return nil, bad(what, "group %d has members and a range", g)
		}
		if r[0] < 0 || r[1] < r[0] || r[1]-r[0] > maxRange-fromRanges {
			return nil, bad(what, "group %d range [%d, %d) is not a range of at most %d object ids", g, r[0], r[1], maxRange-fromRanges)
		}
		fromRanges += r[1] - r[0]
	}
	gs := &Groups{members: make([]int64, 0, n+fromRanges), starts: make([]int64, len(elems)+1)}
	for g, e := range elems {
		gs.starts[g] = int64(len(gs.members))
		if r, ok := ranges[int64(g)]; ok {
			for id := r[0]; id < r[1]; id++ {
				gs.members = append(gs.members, id)
			}
			continue
		}
		for i := 0; i < len(e); i += 8 {
			id := int64(binary.LittleEndian.Uint64(e[i:]))
			if id < 0 {
				return nil, bad(what, "group %d: negative member id %d", g, id)
			}
			gs.members = append(gs.members, id)
		}
	}
	gs.starts[len(elems)] = int64(len(gs.members))
	return gs, nil
}
