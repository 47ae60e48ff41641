package zvf

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// gatherCase: a 4,000-row float32×3 chunk and the rows of it a box keeps:
// either scattered (half the rows at random) or in runs (whole bins).
func gatherCase(runs bool) ([]byte, []int32) {
	const n = 4000
	src := make([]byte, 12*n)
	for i := range src {
		src[i] = byte(i)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var rows []int32
	for i := int32(0); i < n; i++ {
		if runs && (i/160)%2 == 0 || !runs && r.IntN(2) == 0 {
			rows = append(rows, i)
		}
	}
	return src, rows
}

func TestGather(t *testing.T) {
	t.Parallel()
	for _, runs := range []bool{false, true} {
		src, rows := gatherCase(runs)
		for _, w := range []int{12, 4, 8} { // the inline 12- and 8-byte paths and the general one
			got := gather([]byte("prefix"), src, rows, w)
			want := []byte("prefix")
			for _, r := range rows {
				want = append(want, src[int(r)*w:int(r+1)*w]...)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("runs=%v w=%d: gather differs", runs, w)
			}
		}
	}
}

// BenchmarkGather: copying a box's rows out of a cached chunk.
func BenchmarkGather(b *testing.B) {
	for _, runs := range []bool{false, true} {
		name := "scattered"
		if runs {
			name = "runs"
		}
		b.Run(name, func(b *testing.B) {
			src, rows := gatherCase(runs)
			dst := gather(nil, src, rows, 12)
			b.SetBytes(int64(len(dst)))
			b.ReportAllocs()
			for b.Loop() {
				dst = gather(dst[:0], src, rows, 12)
			}
		})
	}
}
