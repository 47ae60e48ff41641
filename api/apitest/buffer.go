package apitest

import (
	"strings"
	"sync"
	"time"
)

// A Buffer collects what a server writes from its own goroutines (logs,
// a command's output); a test waits for what it looks for with Await,
// which wakes on each write instead of polling.
type Buffer struct {
	mu   sync.Mutex
	b    strings.Builder
	more chan struct{} // closed by the next write
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.more != nil {
		close(b.more)
		b.more = nil
	}
	return b.b.Write(p)
}

// String is what has been written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Await calls found with what has been written, now and after each
// write, until it returns true; it returns false once within passes or
// stop is closed (the writer is gone) first, after a last look at what
// was written by then. found runs on the caller's goroutine, with no lock
// held.
func (b *Buffer) Await(within time.Duration, stop <-chan struct{}, found func(text string) bool) bool {
	timeout := time.NewTimer(within)
	defer timeout.Stop()
	for {
		b.mu.Lock()
		text := b.b.String()
		if b.more == nil {
			b.more = make(chan struct{})
		}
		more := b.more
		b.mu.Unlock()
		if found(text) {
			return true
		}
		select {
		case <-more:
		case <-stop:
			return found(b.String())
		case <-timeout.C:
			return false
		}
	}
}
