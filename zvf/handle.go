package zvf

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// Handle keeps one store current for a long-running server. Stores are
// read-only while served, but their owners replace them (a pipeline
// rewrites a bucket prefix); Refresh notices and reopens, so no cache
// serves the old bytes.
//
// With Watch set, Refresh fingerprints every object of the store (key,
// size and version: ETag/MD5 or mtime) and reopens the store under a new
// cache generation when the fingerprint moves, dropping the old
// generation's cache entries. A store that fails to open keeps its typed
// error, which callers serve, until a Refresh opens it.
type Handle struct {
	name  string
	st    storage.Store
	o     Options
	watch bool

	mu  sync.Mutex // one Refresh at a time; guards gen
	gen uint64
	cur atomic.Pointer[handleState]
}

type handleState struct {
	store *Store
	err   error
	fp    string
}

// OpenHandle opens st like Open; an error to open is kept in the handle,
// not returned (ctx's own end is returned). watch enables change detection
// in Refresh; without it Refresh only retries a failed open.
func OpenHandle(ctx context.Context, st storage.Store, o Options, watch bool) (*Handle, error) {
	h := &Handle{name: o.Name, st: st, o: o, watch: watch}
	h.cur.Store(&handleState{})
	if _, err := h.refresh(ctx, true); err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return h, nil
}

// StaticHandle wraps an already-open store that is never refreshed.
func StaticHandle(s *Store) *Handle {
	h := &Handle{name: s.name, st: s.st, o: Options{Name: s.name}}
	h.cur.Store(&handleState{store: s})
	return h
}

// Name is the store's name.
func (h *Handle) Name() string { return h.name }

// Store returns the current store, or the error that keeps it from
// opening.
func (h *Handle) Store() (*Store, error) {
	c := h.cur.Load()
	if c.store == nil && c.err == nil {
		return nil, &Error{Kind: ErrCorrupt, Store: h.name, Level: -1, Err: fmt.Errorf("store is not open")}
	}
	return c.store, c.err
}

// Refresh reopens the store if its objects changed (with watch) or if it
// failed to open before. It reports whether what is served changed; the
// error is the reopen's (now served), or the check's own (listing the
// backend failed: what was served before is still served).
func (h *Handle) Refresh(ctx context.Context) (bool, error) { return h.refresh(ctx, false) }

func (h *Handle) refresh(ctx context.Context, first bool) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cur := h.cur.Load()
	fp := ""
	if h.watch {
		var err error
		if fp, err = Fingerprint(ctx, h.st); err != nil {
			if first {
				h.cur.Store(&handleState{err: h.wrapErr(err)})
			}
			return false, err
		}
		if !first && cur.err == nil && fp == cur.fp {
			return false, nil
		}
	} else if !first && cur.err == nil {
		return false, nil
	}
	h.gen++
	o := h.o
	o.gen, o.fp = h.gen, fp
	s, err := Open(ctx, h.st, o)
	next := &handleState{store: s, err: err, fp: fp}
	if err != nil {
		next.store = nil
		if ctx.Err() != nil && cur.store != nil {
			return false, err // cancelled mid-open: keep serving the old one
		}
	}
	h.cur.Store(next)
	if cur.store != nil {
		if p, ok := h.o.Cache.(interface{ RemovePrefix(string) int }); ok {
			p.RemovePrefix(cur.store.cachePrefix)
		}
	}
	return true, err
}

func (h *Handle) wrapErr(err error) error {
	var ze *Error
	if errors.As(err, &ze) {
		return err
	}
	return &Error{Kind: kindOf(err), Store: h.name, Level: -1, Err: err}
}

// Close releases the storage behind the handle.
func (h *Handle) Close() error { return h.st.Close() }

// Fingerprint summarises every object under st: it changes when any key
// is added, removed, resized or rewritten with new content. It is an
// order-independent sum of per-object hashes, so the listing is never
// held in memory.
func Fingerprint(ctx context.Context, st storage.Store) (string, error) {
	var a, b, n uint64
	err := st.Walk(ctx, "", func(key string, at storage.Attrs) error {
		h := sha256.New()
		h.Write([]byte(key))
		h.Write([]byte{0})
		h.Write([]byte(strconv.FormatInt(at.Size, 10)))
		h.Write([]byte{0})
		h.Write([]byte(at.ETag))
		var sum [sha256.Size]byte
		h.Sum(sum[:0])
		a += binary.LittleEndian.Uint64(sum[0:])
		b += binary.LittleEndian.Uint64(sum[8:])
		n++
		return nil
	})
	if err != nil {
		return "", err
	}
	var out [24]byte
	binary.LittleEndian.PutUint64(out[0:], a)
	binary.LittleEndian.PutUint64(out[8:], b)
	binary.LittleEndian.PutUint64(out[16:], n)
	return hex.EncodeToString(out[:]), nil
}
