package ragged

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

// TestPermutation: every permutation of 1..5 endpoints round-trips through
// its Lehmer code, codes are dense (0 … n!-1) and 0 is the identity; a code
// past n! is refused.
func TestPermutation(t *testing.T) {
	for n := 1; n <= 5; n++ {
		fact := int64(1)
		for i := 2; i <= n; i++ {
			fact *= int64(i)
		}
		seen := map[string]bool{}
		sigma := make([]int, n)
		for code := int64(0); code < fact; code++ {
			if err := Permutation(code, sigma); err != nil {
				t.Fatal(err)
			}
			if got := LehmerCode(sigma); got != code {
				t.Fatalf("n=%d: code %d decodes to %v, which encodes to %d", n, code, sigma, got)
			}
			seen[string(toBytes(sigma))] = true
			if code == 0 {
				for i, v := range sigma {
					if v != i {
						t.Fatalf("n=%d: code 0 is %v, not the identity", n, sigma)
					}
				}
			}
		}
		if int64(len(seen)) != fact {
			t.Fatalf("n=%d: %d distinct permutations from %d codes", n, len(seen), fact)
		}
		if err := Permutation(fact, sigma); err == nil {
			t.Fatalf("n=%d: code %d accepted", n, fact)
		}
	}
	if err := Permutation(-1, make([]int, 3)); err == nil {
		t.Fatal("negative code accepted")
	}
}

func toBytes(v []int) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}

// TestLinkCell: the digest's cells decode to their records — flat intra
// rows, a ragged cross cell whose perm_idx swaps the endpoints back, a
// triangle whose winding the perm restores — and damaged cells are
// refused with ErrMalformed.
func TestLinkCell(t *testing.T) {
	// A cross edge (7 → 2) stored sorted as (2, 7): K=1, offset 0, [perm 1, 2, 7].
	cross, _ := hex.DecodeString("01000000000000000000000000000000010000000000000002000000000000000700000000000000")
	got, sigma, err := decodeInput(cross, false, 2, true)
	if err != nil || !reflect.DeepEqual(got, []int64{7, 2}) || !reflect.DeepEqual(sigma, []uint8{1, 0}) {
		t.Fatalf("swapped edge: %v %v", got, err)
	}
	// graph_v09 0/links/0/0.0.0 cell 1.4.6: eight flat edges.
	flat, _ := hex.DecodeString("0200000000000000010000000000000005000000000000000400000000000000060000000000000004000000000000000700000000000000050000000000000008000000000000000600000000000000")
	got, sigma, err = decodeInput(flat, true, 2, false)
	if err != nil || sigma != nil || !reflect.DeepEqual(got, []int64{2, 1, 5, 4, 6, 4, 7, 5, 8, 6}) {
		t.Fatalf("flat edges: %v %v", got, err)
	}
	// A triangle (a, b, c) stored sorted as (b, c, a): σ = [1, 2, 0].
	code := LehmerCode([]int{1, 2, 0})
	tri, err := EncodeLinkCell([]int64{20, 30, 10}, 3, []int64{code}, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := decodeInput(tri, false, 3, true); err != nil || !reflect.DeepEqual(got, []int64{10, 20, 30}) {
		t.Fatalf("triangle winding: %v %v", got, err)
	}
	// Two groups are concatenated, not read as rows.
	two := binary.LittleEndian.AppendUint64(nil, 2)
	two = binary.LittleEndian.AppendUint64(two, 0)
	two = binary.LittleEndian.AppendUint64(two, 16)
	for _, v := range []int64{1, 2, 3, 4} {
		two = binary.LittleEndian.AppendUint64(two, uint64(v))
	}
	if got, _, err := decodeInput(two, false, 2, false); err != nil || !reflect.DeepEqual(got, []int64{1, 2, 3, 4}) {
		t.Fatalf("two groups: %v %v", got, err)
	}
	for name, tc := range map[string]struct {
		b       []byte
		flat    bool
		width   int
		hasPerm bool
	}{
		"flat, not whole rows":       {flat[:20], true, 2, false},
		"perm_idx past L!":           {mustCell(t, []int64{1, 2}, 2, []int64{2}), false, 2, true},
		"negative endpoint":          {mustCell(t, []int64{-1, 2}, 2, nil), true, 2, false},
		"negative endpoint permuted": {mustCell(t, []int64{1, -2}, 2, []int64{1}), false, 2, true},
		"width 0":                    {flat, true, 0, false},
		"perm over 21 endpoints":     {nil, false, 21, true},
	} {
		if _, _, err := DecodeLinkCell(tc.b, tc.flat, tc.width, tc.hasPerm); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// decodeInput decodes a cell and restores each row's input order.
func decodeInput(b []byte, flat bool, width int, hasPerm bool) ([]int64, []uint8, error) {
	rows, sigma, err := DecodeLinkCell(b, flat, width, hasPerm)
	if err != nil {
		return nil, nil, err
	}
	return InputOrder(rows, sigma, width), sigma, nil
}

func mustCell(t *testing.T, rows []int64, width int, perms []int64) []byte {
	t.Helper()
	b, err := EncodeLinkCell(rows, width, perms, perms == nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGroupsFromElements(t *testing.T) {
	el := func(ids ...int64) []byte {
		var b []byte
		for _, v := range ids {
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
		return b
	}
	g, err := GroupsFromElements([][]byte{el(0, 2), nil, el(5)}, map[int64][2]int64{1: {3, 6}}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if g.Len() != 3 || !reflect.DeepEqual(g.Members(0), []int64{0, 2}) || !reflect.DeepEqual(g.Members(1), []int64{3, 4, 5}) || !reflect.DeepEqual(g.Members(2), []int64{5}) {
		t.Fatalf("groups %v %v %v", g.Members(0), g.Members(1), g.Members(2))
	}
	for name, tc := range map[string]struct {
		elems  [][]byte
		ranges map[int64][2]int64
	}{
		"partial id":            {[][]byte{{1, 2, 3}}, nil},
		"negative id":           {[][]byte{el(-4)}, nil},
		"range past the groups": {[][]byte{nil}, map[int64][2]int64{1: {0, 1}}},
		"range and members":     {[][]byte{el(1)}, map[int64][2]int64{0: {0, 1}}},
		"backwards range":       {[][]byte{nil}, map[int64][2]int64{0: {5, 1}}},
		"range over the bound":  {[][]byte{nil}, map[int64][2]int64{0: {0, 1 << 40}}},
	} {
		if _, err := GroupsFromElements(tc.elems, tc.ranges, 100); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzDecodeLinkCell: any bytes decode or fail with ErrMalformed, within
// the allocation bound (the values 1:1, and a permuted copy); what decodes
// has whole rows of non-negative endpoints and encodes back to a cell
// that decodes the same.
func FuzzDecodeLinkCell(f *testing.F) {
	f.Add(mustCellF(f, []int64{3, 4}, 2, []int64{1}, false), false, 2, true)
	f.Add(mustCellF(f, []int64{1, 2, 3, 4, 5, 6}, 3, nil, true), true, 3, false)
	f.Add(binary.LittleEndian.AppendUint64(nil, 1<<62), false, 2, true) // K claims 2^62 groups
	f.Fuzz(func(t *testing.T, b []byte, flat bool, width int, hasPerm bool) {
		var rows []int64
		var sigma []uint8
		var err error
		if n := alloctest.Bytes(func() { rows, sigma, err = DecodeLinkCell(b, flat, width, hasPerm) }); n > allocBound(b) {
			t.Fatalf("%d bytes allocated %d", len(b), n)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if len(rows)%width != 0 || (hasPerm && len(sigma) != len(rows)) {
			t.Fatalf("%d values, %d perm entries for width %d", len(rows), len(sigma), width)
		}
		rows = InputOrder(rows, sigma, width)
		for _, v := range rows {
			if v < 0 {
				t.Fatalf("negative endpoint %d", v)
			}
		}
		again, err := EncodeLinkCell(rows, width, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		if back, _, err := DecodeLinkCell(again, true, width, false); err != nil || !bytes.Equal(int64Bytes(back), int64Bytes(rows)) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func mustCellF(f *testing.F, rows []int64, width int, perms []int64, flat bool) []byte {
	b, err := EncodeLinkCell(rows, width, perms, flat)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

func int64Bytes(v []int64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return b
}

// FuzzGroupsFromElements: a groups array's elements (cut from one input at
// the given lengths) and a range decode or fail with ErrMalformed, and
// allocate in proportion to the bytes plus the range bound.
func FuzzGroupsFromElements(f *testing.F) {
	f.Add(binary.LittleEndian.AppendUint64(nil, 3), []byte{8, 0}, int64(1), int64(0), int64(5))
	f.Add([]byte{}, []byte{0}, int64(0), int64(0), int64(1<<40))
	f.Fuzz(func(t *testing.T, b, lens []byte, g, start, stop int64) {
		var elems [][]byte
		for _, n := range lens {
			n := min(int(n), len(b))
			elems = append(elems, b[:n])
			b = b[n:]
		}
		var err error
		var gs *Groups
		const maxRange = 1 << 12
		if n := alloctest.Bytes(func() { gs, err = GroupsFromElements(elems, map[int64][2]int64{g: {start, stop}}, maxRange) }); n > allocBound(b, lens)+8*maxRange+uint64(24*len(elems)) {
			t.Fatalf("allocated %d", n)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		for i := 0; i < gs.Len(); i++ {
			for _, id := range gs.Members(i) {
				if id < 0 {
					t.Fatalf("negative member %d", id)
				}
			}
		}
	})
}
