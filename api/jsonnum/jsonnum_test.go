package jsonnum

import (
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

func check(t testing.TB, v float32) {
	got := AppendFloat32(nil, v)
	want := strconv.AppendFloat(nil, float64(v), 'g', -1, 32)
	if string(got) != string(want) {
		t.Fatalf("%#08x (%v): got %s, want %s", math.Float32bits(v), v, got, want)
	}
}

func TestEdgeCases(t *testing.T) {
	cases := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 0.1, 0.2, 0.3, 1.0 / 3, 2.0 / 3, 123.456, -987.654,
		math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, math.Float32frombits(0x007fffff), // largest subnormal
		math.Float32frombits(0x00800000), // smallest normal
		1e-4, 1e-5, 9.99999e-5, 1.5e-5, 999999, 1e6, 1.234567e6, 123456789, 1e7, 1e10, 1e20, 1e21, 1e30, 1e38,
		16777216, 16777217, 33554432, 0.5, 0.25, 0.125, 3.4028235e38, 1.17549435e-38, 7.038531e-26, 9.223372e18}
	for e := -45; e <= 38; e++ {
		cases = append(cases, float32(math.Pow10(e)), float32(3*math.Pow10(e)), float32(-7.5*math.Pow10(e)))
	}
	for e := -149; e <= 127; e++ {
		cases = append(cases, float32(math.Ldexp(1, e)), float32(math.Ldexp(1.5, e)))
	}
	for _, v := range cases {
		check(t, v)
	}
	for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		if got, want := string(AppendFloat32([]byte("x"), v)), "x"+strconv.FormatFloat(float64(v), 'g', -1, 32); got != want {
			t.Errorf("%v: %s, want %s", v, got, want)
		}
	}
}

// TestRandom compares with strconv on millions of bit patterns (every
// exponent, random mantissas) and on coordinate-like values.
func TestRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 3_000_000
	if testing.Short() {
		n = 200_000
	}
	for i := 0; i < n; i++ {
		b := r.Uint32()
		if b>>23&0xff == 0xff {
			continue
		}
		check(t, math.Float32frombits(b))
		check(t, float32(r.Float64()*10000))
	}
}

// TestExhaustive compares every float32 with strconv. It takes a few
// minutes on two cores, so it runs only with ZVF_EXHAUSTIVE=1.
func TestExhaustive(t *testing.T) {
	if os.Getenv("ZVF_EXHAUSTIVE") != "1" {
		t.Skip("set ZVF_EXHAUSTIVE=1 to compare all 2^32 float32 values with strconv")
	}
	workers := runtime.GOMAXPROCS(0)
	var bad atomic.Uint64
	var first atomic.Value
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got, want []byte
			for hi := uint64(w); hi < 1<<16; hi += uint64(workers) {
				for lo := uint64(0); lo < 1<<16; lo++ {
					b := uint32(hi<<16 | lo)
					if b>>23&0xff == 0xff {
						continue
					}
					v := math.Float32frombits(b)
					got = AppendFloat32(got[:0], v)
					want = strconv.AppendFloat(want[:0], float64(v), 'g', -1, 32)
					if string(got) != string(want) {
						if bad.Add(1) == 1 {
							first.Store(string(got) + " want " + string(want) + " for " + strconv.FormatUint(uint64(b), 16))
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d values differ, first: %v", n, first.Load())
	}
}

func FuzzAppendFloat32(f *testing.F) {
	for _, b := range []uint32{0, 1, 0x3f800000, 0x7f7fffff, 0x00800000, 0x4b189680, 0x80000000} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b uint32) {
		if b>>23&0xff == 0xff {
			return
		}
		check(t, math.Float32frombits(b))
	})
}

func benchValues() []float32 {
	r := rand.New(rand.NewPCG(3, 4))
	v := make([]float32, 4096)
	for i := range v {
		if i%4 == 3 {
			v[i] = float32(r.Float64()*2 - 1)
		} else {
			v[i] = float32(r.Float64() * 10000)
		}
	}
	return v
}

func BenchmarkAppendFloat32(b *testing.B) {
	vals := benchValues()
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		buf = AppendFloat32(buf[:0], vals[i&4095])
		i++
	}
}

func BenchmarkStrconv(b *testing.B) {
	vals := benchValues()
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		buf = strconv.AppendFloat(buf[:0], float64(vals[i&4095]), 'g', -1, 32)
		i++
	}
}
