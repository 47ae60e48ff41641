// Package ragged decodes the small int64 layouts ZVF uses for links and
// groups (zvf-format §5.2, §5.3, §6.5): the self-describing ragged blob of
// cross-level links/±N, the cross-chunk link records, and groups'
// data + byte offsets; and ZVF 0.9's (zvf-0.9-format §3.4, §3.6): link
// cells with their perm_idx, and the groups array's elements.
package ragged

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Error is a malformed blob.
type Error struct {
	What   string
	Reason string
}

func (e *Error) Error() string { return e.What + ": " + e.Reason }

// ErrMalformed is matched by every *Error.
var ErrMalformed = errors.New("malformed ragged blob")

func (e *Error) Is(t error) bool { return t == ErrMalformed }

func bad(what, f string, a ...any) error { return &Error{what, fmt.Sprintf(f, a...)} }

func ints(b []byte) []int64 {
	out := make([]int64, len(b)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

// DecodeBlob parses a ragged blob: int64 K, int64 byte offsets[K] into the
// data section, then rows of width int64. It returns all rows of all
// groups, concatenated, as a flat slice of len = rows·width. No bytes, or
// K = 0 and nothing after it, is empty; bytes that are not a blob (fewer
// than K's 8, rows after K = 0) are malformed, not empty.
func DecodeBlob(b []byte, width int) ([]int64, error) {
	const what = "ragged blob"
	if width < 1 {
		return nil, bad(what, "width %d", width)
	}
	if len(b) == 0 {
		return nil, nil
	}
	if len(b) < 8 {
		return nil, bad(what, "%d bytes, fewer than its group count's 8", len(b))
	}
	k := int64(binary.LittleEndian.Uint64(b))
	if k < 0 || k > int64(len(b)-8)/8 {
		return nil, bad(what, "group count %d cannot fit in %d bytes", k, len(b))
	}
	if k == 0 {
		if len(b) > 8 {
			return nil, bad(what, "no groups, then %d bytes", len(b)-8)
		}
		return nil, nil
	}
	data := b[8+8*k:]
	if len(data)%(8*width) != 0 {
		return nil, bad(what, "data of %d bytes is not whole rows of %d int64", len(data), width)
	}
	prev := int64(0)
	for i := int64(0); i < k; i++ {
		off := int64(binary.LittleEndian.Uint64(b[8+8*i:]))
		if off < prev || off > int64(len(data)) || off%(8*int64(width)) != 0 {
			return nil, bad(what, "offset %d of group %d is not a row boundary inside the data", off, i)
		}
		prev = off
	}
	if binary.LittleEndian.Uint64(b[8:]) != 0 {
		return nil, bad(what, "first offset is not 0")
	}
	return ints(data), nil
}

// EncodeBlob renders rows (flat, width per row) as a one-group ragged blob.
func EncodeBlob(rows []int64, width int) ([]byte, error) {
	if width < 1 || len(rows)%width != 0 {
		return nil, fmt.Errorf("ragged blob: %d values are not rows of %d", len(rows), width)
	}
	out := make([]byte, 0, 16+8*len(rows))
	out = binary.LittleEndian.AppendUint64(out, 1)
	out = binary.LittleEndian.AppendUint64(out, 0)
	for _, v := range rows {
		out = binary.LittleEndian.AppendUint64(out, uint64(v))
	}
	return out, nil
}

// Endpoint is one end of a cross-chunk link.
type Endpoint struct {
	Chunk []int64
	Row   int64
}

// DecodeLinks parses cross_chunk_links/<d>/data: records of width
// endpoints, each (chunk coords[ndim]..., row) int64. numLinks < 0 skips
// the count check.
func DecodeLinks(b []byte, width, ndim int, numLinks int64) ([][]Endpoint, error) {
	const what = "cross-chunk links"
	if width < 1 || ndim < 1 || width > 64 || ndim > 32 {
		return nil, bad(what, "width %d, arity %d", width, ndim)
	}
	rec := 8 * width * (ndim + 1)
	if len(b)%rec != 0 {
		return nil, bad(what, "%d bytes are not whole records of %d bytes", len(b), rec)
	}
	n := len(b) / rec
	if numLinks >= 0 && int64(n) != numLinks {
		return nil, bad(what, "%d records, metadata says %d", n, numLinks)
	}
	vals := ints(b)
	out := make([][]Endpoint, n)
	eps := make([]Endpoint, n*width)
	for i := range out {
		out[i] = eps[i*width : (i+1)*width : (i+1)*width]
		for e := 0; e < width; e++ {
			base := (i*width + e) * (ndim + 1)
			ep := &out[i][e]
			ep.Chunk = vals[base : base+ndim : base+ndim]
			ep.Row = vals[base+ndim]
			if ep.Row < 0 {
				return nil, bad(what, "record %d endpoint %d has negative row %d", i, e, ep.Row)
			}
		}
	}
	return out, nil
}

// EncodeLinks renders link records.
func EncodeLinks(links [][]Endpoint, width, ndim int) ([]byte, error) {
	out := make([]byte, 0, len(links)*8*width*(ndim+1))
	for i, l := range links {
		if len(l) != width {
			return nil, fmt.Errorf("cross-chunk links: record %d has %d endpoints, want %d", i, len(l), width)
		}
		for _, ep := range l {
			if len(ep.Chunk) != ndim {
				return nil, fmt.Errorf("cross-chunk links: record %d has %d coords, want %d", i, len(ep.Chunk), ndim)
			}
			for _, c := range ep.Chunk {
				out = binary.LittleEndian.AppendUint64(out, uint64(c))
			}
			out = binary.LittleEndian.AppendUint64(out, uint64(ep.Row))
		}
	}
	return out, nil
}

// Groups holds decoded groups/data + groups/offsets.
type Groups struct {
	members []int64
	starts  []int64 // element offsets, len G+1
}

// DecodeGroups parses the concatenated int64 member ids and the G int64
// BYTE offsets (G entries, not G+1: group g ends where g+1 starts, the last
// at the end of data).
func DecodeGroups(data, offsets []byte) (*Groups, error) {
	const what = "groups"
	if len(data)%8 != 0 || len(offsets)%8 != 0 {
		return nil, bad(what, "data (%d bytes) or offsets (%d bytes) not whole int64", len(data), len(offsets))
	}
	g := &Groups{members: ints(data)}
	offs := ints(offsets)
	g.starts = make([]int64, len(offs)+1)
	prev := int64(0)
	for i, o := range offs {
		if o < prev || o > int64(len(data)) || o%8 != 0 {
			return nil, bad(what, "offset %d of group %d out of order or range", o, i)
		}
		g.starts[i] = o / 8
		prev = o
	}
	g.starts[len(offs)] = int64(len(g.members))
	if len(offs) > 0 && offs[0] != 0 {
		return nil, bad(what, "first offset is %d, not 0", offs[0])
	}
	for _, m := range g.members {
		if m < 0 {
			return nil, bad(what, "negative member id %d", m)
		}
	}
	return g, nil
}

// Len is the number of groups.
func (g *Groups) Len() int { return len(g.starts) - 1 }

// Members returns group i's object ids (a view).
func (g *Groups) Members(i int) []int64 { return g.members[g.starts[i]:g.starts[i+1]:g.starts[i+1]] }

// EncodeGroups renders groups as data + byte offsets.
func EncodeGroups(groups [][]int64) (data, offsets []byte) {
	var n int64
	for _, m := range groups {
		offsets = binary.LittleEndian.AppendUint64(offsets, uint64(n*8))
		for _, v := range m {
			data = binary.LittleEndian.AppendUint64(data, uint64(v))
		}
		n += int64(len(m))
	}
	return data, offsets
}
