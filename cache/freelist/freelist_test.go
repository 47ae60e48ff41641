package freelist

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestListBounded: a list keeps at most its size across collections,
// however many values were put back, and hands each out once.
func TestListBounded(t *testing.T) {
	for _, tc := range []struct {
		name      string
		size, put int
	}{
		{"zero value keeps none", -1, 3},
		{"empty", 4, 0},
		{"under its size", 4, 2},
		{"at its size", 4, 4},
		{"over its size", 4, 10},
		{"one", 1, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l List[*[]byte]
			if tc.size >= 0 {
				l.Init(tc.size)
			}
			put := map[*[]byte]bool{}
			for range tc.put {
				b := new([]byte)
				put[b] = true
				l.Put(b)
			}
			// Two collections empty the sync.Pool behind the list (its
			// victim cache too): what is left is the list's own.
			runtime.GC()
			runtime.GC()
			got := map[*[]byte]bool{}
			for {
				b, ok := l.Get()
				if !ok {
					break
				}
				if !put[b] {
					t.Fatalf("got %p, never put", b)
				}
				if got[b] {
					t.Fatalf("got %p twice", b)
				}
				got[b] = true
			}
			want := min(max(tc.size, 0), tc.put)
			if len(got) != want {
				t.Errorf("kept %d across collections, want %d", len(got), want)
			}
		})
	}
}

// TestListLastInFirstOut: Get hands back the value put last (the one a
// core used last), not the one kept longest.
func TestListLastInFirstOut(t *testing.T) {
	var l List[*[]byte]
	l.Init(4)
	a, b, c := new([]byte), new([]byte), new([]byte)
	l.Put(a)
	l.Put(b)
	l.Put(c)
	for i, want := range []*[]byte{c, b, a} {
		if got, ok := l.Get(); !ok || got != want {
			t.Fatalf("get %d: %p (ok %v), want %p: the last put", i, got, ok, want)
		}
		if i == 0 {
			l.Put(c) // back on top
			if got, _ := l.Get(); got != c {
				t.Fatalf("after a put: %p, want %p again", got, c)
			}
		}
	}
}

// TestListNeverShared: values got and put back by many goroutines at once
// are never held by two of them.
func TestListNeverShared(t *testing.T) {
	type buf struct{ held atomic.Int32 }
	var l List[*buf]
	l.Init(2)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range 2000 {
				b, ok := l.Get()
				if !ok {
					b = new(buf)
				}
				if n := b.held.Add(1); n != 1 {
					t.Errorf("a value held %d times at once", n)
					return
				}
				if i%64 == 0 {
					runtime.GC() // empties the pool behind the list, not the list
				}
				b.held.Add(-1)
				l.Put(b)
			}
		})
	}
	wg.Wait()
}

// BenchmarkGetPut: a value got and put back, by a List and by a sync.Pool
// alone (what each answer pays per buffer).
func BenchmarkGetPut(b *testing.B) {
	b.Run("list", func(b *testing.B) {
		var l List[*[]byte]
		l.Init(4)
		l.Put(new([]byte))
		for b.Loop() {
			v, _ := l.Get()
			l.Put(v)
		}
	})
	b.Run("pool", func(b *testing.B) {
		var p sync.Pool
		p.Put(new([]byte))
		for b.Loop() {
			v := p.Get()
			p.Put(v)
		}
	})
}
