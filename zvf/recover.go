package zvf

import (
	"errors"
	"fmt"

	"github.com/zvfserve/zvfserve/cache"
)

// recoverInto is deferred by every goroutine the reader starts (the
// fragment-index fetch, the errgroups of Open and BBox). No HTTP recoverer
// sits on those goroutines, so a panic there — a bug, not bad data — would
// end the process; it becomes the goroutine's error instead: a
// *cache.PanicError, as a panicking cache load gives, logged here with its
// stack. Callers see an internal error (no Kind), never the stack.
func (s *Store) recoverInto(err *error, where string) {
	v := recover()
	if v == nil {
		return
	}
	pe := cache.NewPanicError(v)
	s.logPanic(pe, where)
	*err = &Error{Store: s.name, Level: -1, Err: pe}
}

// logPanic logs a recovered panic once, however many callers share it.
func (s *Store) logPanic(pe *cache.PanicError, where string) {
	if pe.FirstReport() {
		s.log.Error("panic", "store", s.name, "in", where, "panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
	}
}

// logCachePanic logs the panic behind a cache load's error (recovered in
// the cache, which cannot log, and handed to every waiter).
func (s *Store) logCachePanic(err error) {
	var pe *cache.PanicError
	if errors.As(err, &pe) {
		s.logPanic(pe, "cache load")
	}
}
