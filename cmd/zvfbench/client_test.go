package main

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"testing/iotest"

	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

// TestDrainKeepsTheTail: whatever the sizes the reader hands over, a
// drained answer's length is whole and its tail is exactly its last
// tailKeep bytes (all of it when shorter), on a reused drainer too.
func TestDrainKeepsTheTail(t *testing.T) {
	t.Parallel()
	d := newDrainer()
	for _, n := range []int{0, 1, 100, tailKeep - 1, tailKeep, tailKeep + 1, 3*tailKeep + 17, 200 << 10} {
		body := make([]byte, n)
		for i := range body {
			body[i] = byte(i*7 + i>>8)
		}
		want := body[max(0, n-tailKeep):]
		for name, r := range map[string]io.Reader{
			"whole":    bytes.NewReader(body),
			"one byte": iotest.OneByteReader(bytes.NewReader(body)),
			"halves":   iotest.HalfReader(bytes.NewReader(body)),
		} {
			got, tail, err := d.drain(r)
			if err != nil || got != int64(n) || !bytes.Equal(tail, want) {
				t.Errorf("%d bytes, %s: drained %d (err %v), tail of %d bytes equal: %v", n, name, got, err, len(tail), bytes.Equal(tail, want))
			}
		}
	}
}

// TestDrainAllocatesNothing: a drainer taken from the client's pool and
// given back streams an answer away without allocating.
func TestDrainAllocatesNothing(t *testing.T) {
	alloctest.SkipUnderRace(t) // the race detector makes sync.Pool drop items
	c := &benchClient{Client: http.DefaultClient}
	body := bytes.Repeat([]byte("0123456789abcdef"), 20<<10)
	r := bytes.NewReader(body)
	c.drainers.Put(c.drainer())
	allocs := testing.AllocsPerRun(50, func() {
		r.Reset(body)
		d := c.drainer()
		if n, _, err := d.drain(r); err != nil || n != int64(len(body)) {
			t.Fatalf("drained %d of %d: %v", n, len(body), err)
		}
		c.drainers.Put(d)
	})
	if allocs > 0 {
		t.Errorf("%.1f allocations an answer, want 0", allocs)
	}
}
