package storage

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func goroutinesCreated() uint64 {
	m := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(m)
	return m[0].Value.Uint64()
}

// waitIdle waits until n goroutines of w wait for work.
func waitIdle(t *testing.T, w *Workers, n int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); w.idle.Load() != n; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines idle, want %d", w.idle.Load(), n)
		}
	}
}

// TestWorkersReuseAnIdleGoroutine: a call made while a goroutine waits
// for work runs on it; no goroutine is started.
func TestWorkersReuseAnIdleGoroutine(t *testing.T) {
	w := NewWorkers(time.Minute)
	done := make(chan int, 1)
	w.Go(func() { done <- 1 })
	<-done
	waitIdle(t, w, 1)
	before := goroutinesCreated()
	for i := range 100 {
		w.Go(func() { done <- i })
		if got := <-done; got != i {
			t.Fatalf("call %d ran %d", i, got)
		}
		waitIdle(t, w, 1)
	}
	if n := goroutinesCreated() - before; n != 0 {
		t.Errorf("%d goroutines started for 100 calls, each made while one was idle", n)
	}
}

// TestWorkersNeverWait: calls made while every goroutine is busy (here,
// blocked) start their own at once, and each function runs once.
func TestWorkersNeverWait(t *testing.T) {
	w := NewWorkers(time.Millisecond)
	release := make(chan struct{})
	var ran sync.WaitGroup
	ran.Add(20)
	for range 20 {
		w.Go(func() { <-release; ran.Done() }) // returns while the function blocks
	}
	close(release)
	ran.Wait()
}

// TestWorkersEnd: idle goroutines end once their linger has passed.
func TestWorkersEnd(t *testing.T) {
	w := NewWorkers(time.Millisecond)
	var ran sync.WaitGroup
	ran.Add(8)
	for range 8 {
		w.Go(ran.Done)
	}
	ran.Wait()
	for deadline := time.Now().Add(10 * time.Second); w.live.Load() > 0; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines alive 10 s after the calls", w.live.Load())
		}
	}
	if n := w.idle.Load(); n != 0 {
		t.Errorf("%d idle after every goroutine ended", n)
	}
}

// TestWorkersConcurrentCalls: callers racing with goroutines whose
// linger ends (a linger of microseconds, so that claims and endings
// cross) run every function exactly once.
func TestWorkersConcurrentCalls(t *testing.T) {
	w := NewWorkers(20 * time.Microsecond)
	const callers, calls = 8, 500
	var runs atomic.Int64
	var all sync.WaitGroup
	all.Add(callers * calls)
	for range callers {
		go func() {
			for range calls {
				w.Go(func() { runs.Add(1); all.Done() })
			}
		}()
	}
	all.Wait()
	if n := runs.Load(); n != callers*calls {
		t.Fatalf("%d runs for %d calls", n, callers*calls)
	}
	for deadline := time.Now().Add(10 * time.Second); w.live.Load() > 0; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines alive 10 s after the calls", w.live.Load())
		}
	}
	if n := w.idle.Load(); n != 0 {
		t.Errorf("%d idle after every goroutine ended", n)
	}
}
