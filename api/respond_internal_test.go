package api

import (
	"bytes"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// sliceWriter is a ResponseWriter that records each write's slice as
// given (not a copy), to tell a write passed through from a copied one.
type sliceWriter struct {
	*httptest.ResponseRecorder
	writes [][]byte
}

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, p)
	return w.ResponseRecorder.Write(p)
}

// passed reports whether p reached w as the slice given.
func (w *sliceWriter) passed(p []byte) bool {
	for _, q := range w.writes {
		if len(q) > 0 && len(p) > 0 && &q[0] == &p[0] {
			return true
		}
	}
	return false
}

// TestLazyWriterHoldBack: the hold-back buffer copies only what it must
// hold, a write that may still be followed by an error within the limit.
// A write past the limit, or the answer's last (final), goes out as it is;
// the answer streams from where it did when every write was copied (past
// the limit), with the same headers; one that ends within the limit,
// exactly at it too, is sent whole with its length; the bytes are the
// writes', in order.
func TestLazyWriterHoldBack(t *testing.T) {
	const limit = 64
	fill := func(n int, c byte) []byte { return bytes.Repeat([]byte{c}, n) }
	for _, tc := range []struct {
		name   string
		writes [][]byte
		final  int // the write finish makes (-1: none; the compressed path)
		// direct: which writes reach the ResponseWriter as the slice
		// given (not through the hold-back).
		direct []bool
		whole  bool // sent whole, with Content-Length
	}{
		{"small answer, its end uncopied", [][]byte{fill(10, 'a'), fill(20, 'b')}, 1, []bool{false, true}, true},
		{"small answer, compressed", [][]byte{fill(10, 'a'), fill(20, 'b')}, -1, []bool{false, false}, true},
		{"exactly the limit, at its end", [][]byte{fill(limit, 'a')}, 0, []bool{true}, true},
		{"one flush past the limit streams uncopied", [][]byte{fill(limit+1, 'a'), fill(5, 'b'), fill(3, 'c')}, 2, []bool{true, true, true}, false},
		{"held, then past the limit", [][]byte{fill(10, 'a'), fill(limit, 'b')}, -1, []bool{false, true}, false},
		{"exactly the limit held, then its end", [][]byte{fill(limit, 'a'), fill(1, 'b')}, 1, []bool{false, true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &sliceWriter{ResponseRecorder: httptest.NewRecorder()}
			l := lazyWriter{w: rec, limit: limit, timing: true, trailers: []string{"X-Late"},
				now: func() time.Time { return time.Unix(0, 0) }, start: time.Unix(0, 0)}
			var want []byte
			for i, p := range tc.writes {
				l.final = i == tc.final
				if n, err := l.Write(p); err != nil || n != len(p) {
					t.Fatalf("Write: %d, %v", n, err)
				}
				want = append(want, p...)
			}
			if _, err := l.commit(!l.committed, nil); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(rec.Body.Bytes(), want) {
				t.Fatalf("body %q, want %q", rec.Body.Bytes(), want)
			}
			for i, p := range tc.writes {
				if got := rec.passed(p); got != tc.direct[i] {
					t.Errorf("write %d (%d bytes): passed through uncopied %v, want %v", i, len(p), got, tc.direct[i])
				}
			}
			h := rec.Header()
			if tc.whole {
				if h.Get("Content-Length") != strconv.Itoa(len(want)) || h.Get("Trailer") != "" || h.Get("Server-Timing") != "total;dur=0.000" {
					t.Errorf("whole answer of %d bytes: headers %v", len(want), h)
				}
			} else if h.Get("Content-Length") != "" || h.Get("Trailer") != "X-Late" || h.Get("Server-Timing") != "first-byte;dur=0.000" {
				t.Errorf("streamed answer: headers %v", h)
			}
			if rec.Code != http.StatusOK {
				t.Errorf("status %d", rec.Code)
			}
			if held := l.mem != nil; held != !tc.direct[0] {
				t.Errorf("hold-back buffer taken %v, with the first write held %v", held, !tc.direct[0])
			}
		})
	}
}

// TestBodyWriterUncompressedHoldsNothing: an uncompressed answer larger
// than the hold-back reaches the ResponseWriter without a copy in the
// hold-back (the body's buffer is passed on as it is), and takes no
// hold-back buffer; its bytes are the encoder's.
func TestBodyWriterUncompressedHoldsNothing(t *testing.T) {
	s := &Server{}
	s.o.Now = time.Now
	for _, size := range []int{100, lazyLimit, lazyLimit + 1, 3*lazyLimit + 7} {
		rec := &sliceWriter{ResponseRecorder: httptest.NewRecorder()}
		b, err := s.newBody(rec, nil, representation{codec: binaryCodec{}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, size)
		for i := range want {
			want[i] = byte(i * 7)
		}
		// In 1000-byte writes, as an encoder's blocks come.
		for p := want; len(p) > 0; p = p[min(len(p), 1000):] {
			if _, err := b.Write(p[:min(len(p), 1000)]); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.finish(); err != nil {
			t.Fatal(err)
		}
		if b.lazy.mem != nil {
			t.Errorf("%d bytes: the hold-back buffer was used", size)
		}
		if !bytes.Equal(rec.Body.Bytes(), want) {
			t.Fatalf("%d bytes: the body differs", size)
		}
		whole := rec.Header().Get("Content-Length") == strconv.Itoa(size)
		if whole != (size <= lazyLimit) {
			t.Errorf("%d bytes: sent whole %v", size, whole)
		}
		b.release()
	}
}

// TestSendHeld: while an answer waits for storage, the body passes on
// what it holds only once the answer has started (an answer not started
// is framed at its end, or where emit starts it, whatever was cached):
// uncompressed, at least sendHeldMin at a time; through a compressor,
// what the compressor makes of it, the compressor never flushed, so the
// compressed bytes are those of an answer that never waited. What is
// passed on reaches the client's side of the ResponseWriter (Flush), and
// the body is the encoder's.
func TestSendHeld(t *testing.T) {
	s := &Server{}
	s.o.Now = time.Now
	for _, tc := range []struct {
		name     string
		encoding string
		// start: the body is flushed after the first write (as emit does
		// past the hold-back). steps: bytes written, then sendHeld; sent:
		// the body bytes the ResponseWriter has after each step (at least,
		// when compressed).
		start        bool
		writes, sent []int
		whole        bool
		// random: incompressible bytes (else a pattern that compresses
		// to almost nothing).
		random bool
	}{
		{"not started, within the hold-back", "", false, []int{100 << 10, 100 << 10}, []int{0, 0}, true, false},
		{"not started, past the hold-back", "", false, []int{200 << 10, 100 << 10}, []int{0, 0}, false, false},
		{"started, then less than a flush", "", true, []int{300 << 10, sendHeldMin - 1}, []int{300 << 10, 300 << 10}, false, false},
		{"started, then a flush", "", true, []int{300 << 10, sendHeldMin}, []int{300 << 10, 300<<10 + sendHeldMin}, false, false},
		{"compressed, not started", "gzip", false, []int{300 << 10, 100 << 10}, []int{0, 0}, true, false},
		{"gzip, started", "gzip", true, []int{300 << 10, 100 << 10}, []int{256 << 10, 300 << 10}, false, true},
		{"zstd, started", "zstd", true, []int{300 << 10, 100 << 10}, []int{256 << 10, 300 << 10}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			b, err := s.newBody(rec, nil, representation{codec: binaryCodec{}, encoding: tc.encoding}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			defer b.release()
			var want []byte
			rnd := rand.New(rand.NewPCG(1, 2))
			for i, n := range tc.writes {
				p := make([]byte, n)
				for j := range p {
					p[j] = byte((len(want) + j) * 7)
					if tc.random {
						p[j] = byte(rnd.Uint32())
					}
				}
				want = append(want, p...)
				for q := p; len(q) > 0; q = q[min(len(q), 1000):] { // as an encoder's blocks come
					if _, err := b.Write(q[:min(len(q), 1000)]); err != nil {
						t.Fatal(err)
					}
				}
				if i == 0 && tc.start {
					if err := b.Flush(); err != nil {
						t.Fatal(err)
					}
				}
				b.sendHeld()
				switch got := rec.Body.Len(); {
				case tc.encoding == "" && got != tc.sent[i], tc.encoding != "" && (got < tc.sent[i] || tc.sent[i] == 0 && got > 0):
					t.Fatalf("after %d bytes and sendHeld: %d sent, want %d", len(want), got, tc.sent[i])
				}
				if i > 0 && tc.sent[i] > tc.sent[i-1] && !rec.Flushed {
					t.Fatalf("after %d bytes: passed on but not flushed to the client", len(want))
				}
			}
			if err := b.finish(); err != nil {
				t.Fatal(err)
			}
			if tc.encoding == "" && !bytes.Equal(rec.Body.Bytes(), want) {
				t.Fatal("the body differs from what was written")
			}
			if tc.encoding != "" && !bytes.Equal(rec.Body.Bytes(), compressedOnce(t, s, tc.encoding, want)) {
				t.Fatal("the compressed body differs from one that was never sent early")
			}
			if whole := rec.Header().Get("Content-Length") != ""; whole != tc.whole {
				t.Errorf("sent whole (Content-Length) %v, want %v", whole, tc.whole)
			}
		})
	}
}

// compressedOnce is body through a new body writer of encoding, written
// in one go and never sent early.
func compressedOnce(t *testing.T, s *Server, encoding string, body []byte) []byte {
	t.Helper()
	rec := httptest.NewRecorder()
	b, err := s.newBody(rec, nil, representation{codec: binaryCodec{}, encoding: encoding}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer b.release()
	if _, err := b.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := b.finish(); err != nil {
		t.Fatal(err)
	}
	return rec.Body.Bytes()
}
