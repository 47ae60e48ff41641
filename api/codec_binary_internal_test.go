package api

import (
	"encoding/binary"
	"testing"
)

// TestAppendIndicesRefusesWideIndex: connectivity indices count the whole
// answer; one past uint32 (or negative) is an error, never wrapped.
func TestAppendIndicesRefusesWideIndex(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in []int64
		ok bool
	}{
		{[]int64{0, 1, 1 << 31, 1<<32 - 1}, true},
		{[]int64{0, 1 << 32}, false},
		{[]int64{-1, 2}, false},
	} {
		b, err := appendIndices(nil, tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("%v: %v", tc.in, err)
			continue
		}
		for i := 0; tc.ok && i < len(tc.in); i++ {
			if got := int64(binary.LittleEndian.Uint32(b[4*i:])); got != tc.in[i] {
				t.Errorf("%v: index %d written as %d", tc.in, i, got)
			}
		}
	}
}
