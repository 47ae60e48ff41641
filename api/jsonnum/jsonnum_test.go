package jsonnum

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func want(v float32) string { return strconv.FormatFloat(float64(v), 'g', -1, 32) }

// check compares AppendFloat32 with strconv for v. It marks itself a
// helper only on failure: TestRandom calls it millions of times, and
// t.Helper (a stack walk) cost more than the two formattings.
func check(t testing.TB, v float32) {
	var buf [32]byte
	got := AppendFloat32(buf[:0], v)
	w := strconv.AppendFloat(buf[16:16], float64(v), 'g', -1, 32)
	if !bytes.Equal(got, w) {
		t.Helper()
		t.Fatalf("%#08x (%v): got %q, strconv %q", math.Float32bits(v), v, got, w)
	}
}

func TestEdgeCases(t *testing.T) {
	for _, tc := range []struct {
		bits uint32
		want string
	}{
		{0x00000000, "0"},
		{0x80000000, "-0"},
		{0x00000001, "1e-45"},          // smallest subnormal
		{0x80000001, "-1e-45"},         // and its negative
		{0x00000002, "3e-45"},          // 2.8e-45
		{0x007fffff, "1.1754942e-38"},  // largest subnormal
		{0x00800000, "1.1754944e-38"},  // smallest normal
		{0x006ce3ee, "1e-38"},          // a subnormal power of ten
		{0x7f7fffff, "3.4028235e+38"},  // MaxFloat32
		{0xff7fffff, "-3.4028235e+38"}, // -MaxFloat32
		{0x7f7fc99e, "3.4e+38"},
		{0x7e967699, "1e+38"},
		{0x3f800000, "1"},
		{0xbf800000, "-1"},
		{0x3dcccccd, "0.1"},
		{0x3e99999a, "0.3"},
		{0x3eaaaaab, "0.33333334"}, // 1/3
		{0x3f2aaaab, "0.6666667"},  // 2/3
		{0x40900000, "4.5"},
		{0x42c80000, "100"},
		{0x477fe000, "65504"},
		{0x497423f0, "999999"},        // last integer without exponent
		{0x49742400, "1e+06"},         // exponent from 10^6 on
		{0x4996b438, "1.234567e+06"},  // ...
		{0x47c35000, "100000"},        // 1e5
		{0x47c35040, "100000.5"},      // 6 digits before the point, no exponent
		{0x47f1205a, "123456.7"},      // ...
		{0x4b189680, "1e+07"},         // 1e7
		{0x4b800000, "1.6777216e+07"}, // 2^24
		{0x4ceb79a3, "1.2345679e+08"}, // 123456789
		{0x4e6e6b28, "1e+09"},
		{0x4f000000, "2.1474836e+09"}, // 2^31
		{0x501502f9, "1e+10"},
		{0x5f000000, "9.223372e+18"},  // 2^63
		{0x6258d727, "1e+21"},         // 1e21
		{0x3a83126f, "0.001"},         // 1e-3
		{0x38d1b717, "0.0001"},        // 1e-4: last without exponent
		{0x3901725b, "0.00012345"},    // ...
		{0x38d1b68e, "9.9999e-05"},    // below 1e-4: exponent
		{0x3727c5ac, "1e-05"},         // 1e-5
		{0x377ba882, "1.5e-05"},       // ...
		{0x33d6bf95, "1e-07"},         // 1e-7
		{0x15ae43fd, "7.038531e-26"},  // a Ryū test value
		{0xc49a522b, "-1234.5677"},    // float32(-1234.5678)
		{0x39800000, "0.00024414063"}, // 2^-12: exact tie between 8-digit neighbours, broken up as strconv does
	} {
		v := math.Float32frombits(tc.bits)
		if got := string(AppendFloat32(nil, v)); got != tc.want {
			t.Errorf("%#08x: got %q, want %q", tc.bits, got, tc.want)
		}
		if w := want(v); w != tc.want {
			t.Errorf("%#08x: the table says %q, strconv %q", tc.bits, tc.want, w)
		}
	}
}

// TestRanges compares with strconv at powers of ten and two over the whole
// range, at their float32 neighbours and at multiples of them.
func TestRanges(t *testing.T) {
	near := func(v float32) {
		check(t, v)
		check(t, -v)
		check(t, math.Nextafter32(v, 0))
		check(t, math.Nextafter32(v, math.MaxFloat32))
	}
	for e := -46; e <= 39; e++ {
		p := math.Pow10(e)
		for _, f := range []float64{1, 1.5, 2, 3, 5, 7.5, 9, 9.999999} {
			near(float32(f * p))
		}
	}
	for e := -149; e <= 127; e++ {
		near(float32(math.Ldexp(1, e)))
		near(float32(math.Ldexp(1.5, e)))
		near(float32(math.Ldexp(1.999999, e)))
	}
	for i := int64(0); i <= 1<<25; i += 1 + i/1000 {
		check(t, float32(i))
		check(t, float32(i)/1024)
		check(t, float32(i)*1024)
	}
}

func TestNotFinite(t *testing.T) {
	for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		if got, w := string(AppendFloat32([]byte("x"), v)), "x"+want(v); got != w {
			t.Errorf("%v: got %q, want %q", v, got, w)
		}
	}
}

// TestRandom compares with strconv for millions of random bit patterns
// (every exponent equally) and of coordinate-like values.
func TestRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 4_000_000
	if testing.Short() {
		n = 200_000
	}
	for range n {
		check(t, math.Float32frombits(r.Uint32()))
	}
	for range n / 4 {
		check(t, float32(r.Float64()*10000))
		check(t, float32(r.Float64()*2-1))
	}
}

// TestAppend checks that the bytes are appended after dst's and that
// nothing is allocated when dst has room.
func TestAppend(t *testing.T) {
	dst := AppendFloat32([]byte("[1,"), -1.5e-7)
	if got := string(dst); got != "[1,-1.5e-07" {
		t.Errorf("got %q", got)
	}
	buf := make([]byte, 0, 64)
	vals := benchValues()
	allocs := testing.AllocsPerRun(100, func() {
		for _, v := range vals[:64] {
			buf = AppendFloat32(buf[:0], v)
		}
		buf = AppendFloat32(buf[:0], math.MaxFloat32)
		buf = AppendFloat32(buf[:0], -math.SmallestNonzeroFloat32)
		buf = AppendFloat32(buf[:0], 12345)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per run", allocs)
	}
	// The bytes past the appended ones are left alone.
	full := []byte("abcdefghijklmnopqrstuvwxyz")
	AppendFloat32(full[:1], -0.0001234)
	if got := string(full); got != "a-0.0001234lmnopqrstuvwxyz" {
		t.Errorf("got %q", got)
	}
}

// TestTables checks every scale against exact arithmetic: k is
// ⌊log10 (w·2^q)⌋ for an interval of w = 1 (or 3/4 below a power of two)
// ulps 2^q, and (x<<h)·g / 2^64 is x·2^q·10^-k with g rounded up by less
// than 1: g-1 ≤ 10^-k · 2^(64-h+q) < g.
func TestTables(t *testing.T) {
	pow := func(b int64, n int) *big.Rat {
		p := new(big.Int).Exp(big.NewInt(b), big.NewInt(int64(max(n, -n))), nil)
		if n < 0 {
			return new(big.Rat).SetFrac(big.NewInt(1), p)
		}
		return new(big.Rat).SetInt(p)
	}
	for irregular, w := range []*big.Rat{big.NewRat(1, 1), big.NewRat(3, 4)} {
		for x := 0; x < 255; x++ {
			if irregular == 1 && x < 2 {
				continue
			}
			sc := scales[irregular][x]
			q, k, h := max(x, 1)-150, int(sc.k), int(sc.h)
			width := new(big.Rat).Mul(w, pow(2, q))
			if pow(10, k).Cmp(width) > 0 || width.Cmp(pow(10, k+1)) >= 0 {
				t.Errorf("scales[%d][%d]: k=%d is not ⌊log10 %v⌋", irregular, x, k, width.FloatString(50))
			}
			if h < 1 || h > 4 {
				t.Errorf("scales[%d][%d]: h=%d", irregular, x, h)
			}
			exact := new(big.Rat).Mul(pow(10, -k), pow(2, 64-h+q))
			g := new(big.Rat).SetInt(new(big.Int).SetUint64(sc.g))
			g1 := new(big.Rat).Sub(g, big.NewRat(1, 1))
			if g1.Cmp(exact) > 0 || exact.Cmp(g) >= 0 {
				t.Errorf("scales[%d][%d]: g=%#x is not 10^%d·2^%d rounded up", irregular, x, sc.g, -k, 64-h+q)
			}
		}
	}
}

// TestExhaustive compares every one of the 2^32 bit patterns with strconv.
// It takes minutes, so it runs only with ZVF_EXHAUSTIVE=1:
//
//	ZVF_EXHAUSTIVE=1 go test -run Exhaustive -v -timeout 1h ./api/jsonnum/
//
// ZVF_EXHAUSTIVE=K/N checks the K-th of N equal slices (a few seconds for
// N=64): CI checks one slice a run, a different one each day, so every
// value is checked every N days.
func TestExhaustive(t *testing.T) {
	const blocks = 1 << 12 // of 2^20 patterns each, handed out in turn
	lo, hi := uint64(0), uint64(blocks)
	switch v := os.Getenv("ZVF_EXHAUSTIVE"); {
	case v == "1":
	case strings.Contains(v, "/"):
		var k, n uint64
		if _, err := fmt.Sscanf(v, "%d/%d", &k, &n); err != nil || n == 0 || n > blocks || blocks%n != 0 || k >= n {
			t.Fatalf("ZVF_EXHAUSTIVE=%q: want K/N with N dividing %d and K < N", v, blocks)
		}
		lo, hi = k*(blocks/n), (k+1)*(blocks/n)
	default:
		t.Skip("set ZVF_EXHAUSTIVE=1 (or K/N for a slice) to compare all 2^32 float32 values with strconv")
	}
	var done, bad atomic.Uint64
	var next atomic.Uint64
	next.Store(lo)
	var mu sync.Mutex
	var first []string
	start := time.Now()
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			var got, w []byte
			for {
				blk := next.Add(1) - 1
				if blk >= hi {
					return
				}
				for i := blk << 20; i < (blk+1)<<20; i++ {
					v := math.Float32frombits(uint32(i))
					got = AppendFloat32(got[:0], v)
					w = strconv.AppendFloat(w[:0], float64(v), 'g', -1, 32)
					if !bytes.Equal(got, w) {
						bad.Add(1)
						mu.Lock()
						if len(first) < 10 {
							first = append(first, strconv.FormatUint(i, 16)+": "+string(got)+" want "+string(w))
						}
						mu.Unlock()
					}
				}
				if d := done.Add(1); d%(blocks/16) == 0 {
					t.Logf("%d/16 of all done, %d mismatches, %v", d/(blocks/16), bad.Load(), time.Since(start).Round(time.Second))
				}
			}
		})
	}
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d values of [%#x, %#x) differ from strconv, first: %q", n, lo<<20, hi<<20, first)
	}
	t.Logf("all bit patterns in [%#x, %#x) identical to strconv in %v", lo<<20, hi<<20, time.Since(start).Round(time.Second))
}

func FuzzAppendFloat32(f *testing.F) {
	for _, b := range []uint32{0, 0x80000000, 1, 0x007fffff, 0x00800000, 0x3f800000, 0x7f7fffff, 0x4b189680, 0x39800000, 0x3dcccccd, 0x7fc00000} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b uint32) {
		check(t, math.Float32frombits(b))
	})
}

// benchValues are coordinate-like: three in four in [0, 10000), the rest
// in [-1, 1). There are 2^16 of them, too many for the branch predictor to
// learn their sequence as it would 4096.
func benchValues() []float32 {
	r := rand.New(rand.NewPCG(3, 4))
	v := make([]float32, 1<<16)
	for i := range v {
		if i%4 == 3 {
			v[i] = float32(r.Float64()*2 - 1)
		} else {
			v[i] = float32(r.Float64() * 10000)
		}
	}
	return v
}

// benchmark formats the values as one JSON array per op, as the JSON
// encoder does, and reports ns per value and output MB/s.
func benchmark(b *testing.B, format func([]byte, float32) []byte) {
	vals := benchValues()
	buf := make([]byte, 0, 16*len(vals))
	for _, v := range vals {
		buf = append(format(buf, v), ',')
	}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = buf[:0]
		for _, v := range vals {
			buf = append(format(buf, v), ',')
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(vals)), "ns/value")
}

func BenchmarkAppendFloat32(b *testing.B) { benchmark(b, AppendFloat32) }

func BenchmarkStrconv(b *testing.B) {
	benchmark(b, func(dst []byte, v float32) []byte {
		return strconv.AppendFloat(dst, float64(v), 'g', -1, 32)
	})
}
