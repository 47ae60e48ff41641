package zvf

import (
	"errors"
	"time"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// errNotOpenYet is what a handle from NewHandle serves until it opens.
var errNotOpenYet = errors.New("the store has not opened yet")

// NewHandle is OpenHandle without the open: until a Refresh opens it, the
// handle serves an ErrUnavailable saying the store has not opened yet. A
// server that starts listening while its stores open (rather than after)
// keeps one store whose backend hangs at start from holding the others,
// and its health checks, until that open's deadline.
func NewHandle(st storage.Store, o Options, w Watch) *Handle {
	if w.Settle <= 0 {
		w.Settle = 2 * time.Second
	}
	if w.Now == nil {
		w.Now = time.Now
	}
	h := &Handle{name: o.Name, st: st, o: o, w: w, lock: make(chan struct{}, 1)}
	h.cur.Store(&handleState{err: &Error{Kind: ErrUnavailable, Store: o.Name, Level: -1, Err: errNotOpenYet}})
	return h
}
