package api

import "github.com/zvfserve/zvfserve/cache"

// Answers being written hold memory — write buffers, compressors, rounds
// of formatted rows, a JSON page's ids and attribute values — and it is
// counted against the cache's byte budget, so that the cache and the
// answers together stay near it (serve sets the Go soft memory limit a
// fixed headroom above it): each answer reserves what it holds, and the
// cache evicts to make room, down to nothing. Reservations are bounded by
// admission: a request starts work only while answers hold less than
// answerLimit (throttle), else it waits for room up to QueueWait, then
// gets 503. A started answer never waits for memory (two answers waiting
// on each other's could wait forever), so reservations may pass the
// limit by what the answers at work then grow to: bounded pages (see
// jsonPageHold) and buffers, at most MaxConcurrent of them.

// minAnswerLimit is the least answers may hold before new ones wait, so
// that a small cache budget does not serialise answers.
const minAnswerLimit = 256 << 20

// Per-answer memory that does not depend on its rows: the write buffer
// and the hold-back buffer, or a write buffer of both's size (see newBody), and a compressor's state (zstd
// with its 256 KiB window: about 1.2 MB; gzip less; zstd at the level
// quantized answers get, about 4.7 MB).
const (
	bodyBufferBytes      = 2 * lazyLimit
	compressorBytes      = 5 << 18
	denseCompressorBytes = 5 << 20
)

// answerLimit is what answers may hold, in all, before new ones wait.
func answerLimit(c *cache.Cache) int64 {
	return max(c.Stats().Budget, minAnswerLimit)
}

// answerMem is one answer's reservation against the cache's budget: what
// its body holds (fixed when it starts) and what its encoder holds (which
// grows and shrinks with its buffers). Only the answer's goroutine uses
// it; a nil *answerMem or a nil cache counts nothing.
type answerMem struct {
	c           *cache.Cache
	fixed, held int64
}

func (a *answerMem) reserve(fixed int64) {
	if a == nil {
		return
	}
	a.c.Reserve(fixed - a.fixed)
	a.fixed = fixed
}

// hold sets what the encoder holds now.
func (a *answerMem) hold(n int64) {
	if a == nil || n == a.held {
		return
	}
	a.c.Reserve(n - a.held)
	a.held = n
}

// release gives everything back, once the answer is done.
func (a *answerMem) release() {
	if a == nil {
		return
	}
	a.c.Reserve(-(a.fixed + a.held))
	a.fixed, a.held = 0, 0
}
