package api

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func waitDone(t *testing.T, ctx context.Context, within time.Duration) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(within):
		t.Fatalf("context still running after %v", within)
	}
}

// TestRequestCtx: the request clock reports a timeout as DeadlineExceeded
// to itself and to everything derived from it, moves its deadline once the
// answer starts, passes on the client's cancellation, and after release
// never calls back into the response. Each case runs in a synctest bubble,
// where the deadlines are fake time: exact, and no wait.
func TestRequestCtx(t *testing.T) {
	t.Parallel()
	t.Run("deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var sw statusWriter // what the clock cuts: a zero one records only that it was
			start := time.Now()
			c := newRequestCtx(context.Background(), start.Add(20*time.Millisecond))
			c.setCut(&sw)
			defer c.release()
			child, cancel := context.WithCancel(c)
			defer cancel()
			ran := make(chan struct{})
			context.AfterFunc(c, func() { close(ran) })
			waitDone(t, child, 5*time.Second)
			<-ran
			if took := time.Since(start); took != 20*time.Millisecond {
				t.Fatalf("ended after %v, not at its deadline", took)
			}
			if !errors.Is(c.Err(), context.DeadlineExceeded) || !errors.Is(child.Err(), context.DeadlineExceeded) || !sw.expired.Load() {
				t.Fatalf("err %v, child %v, cut %v", c.Err(), child.Err(), sw.expired.Load())
			}
		})
	})
	t.Run("extended when the answer starts", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := newRequestCtx(context.Background(), time.Now().Add(30*time.Millisecond))
			defer c.release()
			c.extend(time.Now().Add(time.Hour))
			slow, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			select {
			case <-c.Done():
				t.Fatalf("ended at the first deadline: %v", c.Err())
			case <-slow.Done():
			}
		})
	})
	// The deadline moved around a write (later, then back to a work
	// limit), earlier, or later only: the clock ends at the last deadline
	// set, exactly, whichever way the timer was left.
	for _, tc := range []struct {
		name  string
		moves []time.Duration // from the start, in order, after the first deadline of 30 ms
		end   time.Duration
	}{
		{"later, then back", []time.Duration{time.Hour, 50 * time.Millisecond}, 50 * time.Millisecond},
		{"earlier", []time.Duration{10 * time.Millisecond}, 10 * time.Millisecond},
		{"later, then earlier than the first", []time.Duration{time.Hour, 20 * time.Millisecond}, 20 * time.Millisecond},
		{"later twice", []time.Duration{40 * time.Millisecond, 70 * time.Millisecond}, 70 * time.Millisecond},
	} {
		t.Run("moved "+tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				c := newRequestCtx(context.Background(), start.Add(30*time.Millisecond))
				defer c.release()
				for _, m := range tc.moves {
					c.extend(start.Add(m))
				}
				waitDone(t, c, 5*time.Second)
				if took := time.Since(start); took != tc.end || !errors.Is(c.Err(), context.DeadlineExceeded) {
					t.Fatalf("ended after %v (%v), want %v", took, c.Err(), tc.end)
				}
			})
		})
	}
	t.Run("client gone", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			parent, cancel := context.WithCancel(context.Background())
			c := newRequestCtx(parent, time.Now().Add(time.Hour))
			defer c.release()
			child, stop := context.WithCancel(c)
			defer stop()
			cancel()
			waitDone(t, child, 5*time.Second)
			if !errors.Is(c.Err(), context.Canceled) || !errors.Is(child.Err(), context.Canceled) {
				t.Fatalf("err %v, child %v", c.Err(), child.Err())
			}
		})
	})
	// The clock follows the client's context only once something waits on
	// it (Done, AfterFunc); Err alone still sees the client go, and a
	// wait that starts after it went ends at once.
	t.Run("client gone, asked by Err only", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		c := newRequestCtx(parent, time.Now().Add(time.Hour))
		defer c.release()
		if c.Err() != nil {
			t.Fatalf("err %v before the client went", c.Err())
		}
		cancel()
		if !errors.Is(c.Err(), context.Canceled) {
			t.Fatalf("err %v after the client went", c.Err())
		}
		select {
		case <-c.Done():
		default:
			t.Fatal("Done open after Err saw the client go")
		}
	})
	t.Run("client gone before the first Done", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		c := newRequestCtx(parent, time.Now().Add(time.Hour))
		defer c.release()
		cancel()
		select {
		case <-c.Done():
		default:
			t.Fatal("Done open after the client went")
		}
		ran := make(chan struct{})
		context.AfterFunc(c, func() { close(ran) })
		waitDone(t, c, 5*time.Second)
		<-ran
	})
	t.Run("released", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var sw statusWriter
			c := newRequestCtx(context.Background(), time.Now().Add(10*time.Millisecond))
			c.setCut(&sw)
			c.release()
			if !errors.Is(c.Err(), context.Canceled) {
				t.Fatalf("err %v", c.Err())
			}
			c.expire() // a timer run that raced with release
			if sw.expired.Load() || !errors.Is(c.Err(), context.Canceled) {
				t.Fatalf("after release: cut %v, err %v", sw.expired.Load(), c.Err())
			}
		})
	})
}

// TestContextKeysAreDistinct: the values the server keeps in a request's
// context (the request's state, the connection's progress-deadline mark,
// wrap's attempt) never shadow one another, whatever order they are set
// in. Two of them once shared one key, so the mark read false after wrap
// ran.
func TestContextKeysAreDistinct(t *testing.T) {
	t.Parallel()
	ctx := context.WithValue(context.Background(), progressConnKey, true)
	ctx = context.WithValue(ctx, reqStateKey, &reqState{id: "id-1"})
	ctx = context.WithValue(ctx, attemptKey, &attempt{})
	if v, ok := ctx.Value(progressConnKey).(bool); !ok || !v {
		t.Errorf("progress mark after the attempt was stored: %v (%T)", ctx.Value(progressConnKey), ctx.Value(progressConnKey))
	}
	if got := requestID(ctx); got != "id-1" {
		t.Errorf("request id = %q, want id-1", got)
	}
	if _, ok := ctx.Value(attemptKey).(*attempt); !ok {
		t.Errorf("attempt = %T, want *attempt", ctx.Value(attemptKey))
	}
}

// TestPooledClock: a request clock's timer, back in the server's pool
// when its request ends, serves the next request exactly: neither a run of
// it that began for the earlier request nor the earlier context's moves
// after its end end the next one early or keep it past its deadline.
func TestPooledClock(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var pool sync.Pool
		start := time.Now()
		first := &requestCtx{}
		first.start(context.Background())
		first.arm(start.Add(time.Hour), &pool)
		ct := first.clock
		if ct == nil {
			t.Fatal("a clock armed with a pool has no pooled timer")
		}
		first.release()
		if first.clock != nil || first.timer != nil {
			t.Fatal("a released context keeps its pooled timer")
		}

		next := &requestCtx{}
		next.start(context.Background())
		next.mu.Lock()
		next.deadline, next.fireAt = start.Add(20*time.Millisecond), start.Add(20*time.Millisecond)
		next.armClock(next.deadline, ct, &pool) // the timer first had, as the pool hands it on
		next.mu.Unlock()
		defer next.release()

		first.extend(start.Add(time.Millisecond)) // the earlier request's late move
		ct.fire()                                 // a run that began for the earlier request
		if err := next.Err(); err != nil {
			t.Fatalf("the next request ended at once: %v", err)
		}
		waitDone(t, next, 5*time.Second)
		if took := time.Since(start); took != 20*time.Millisecond {
			t.Errorf("the next request ended after %v, want its deadline, 20ms", took)
		}
		if err := next.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Err %v, want DeadlineExceeded", err)
		}
	})
}
