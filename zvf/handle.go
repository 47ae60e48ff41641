package zvf

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// Handle keeps one store current for a long-running server, and makes
// every answer come from one version of it.
//
// Stores are read-only while served, but their owners replace them (a
// pipeline rewrites a folder or bucket prefix in place, a link is
// re-pointed). A watching Handle opens each version of the store at a
// moment t0 and reads it through storage.Since(t0): any object written
// after t0 is an ErrChanged error instead of data, so an answer never
// mixes bytes of two versions. The server then reports the change
// (Changed), and the Handle opens the new version under a new cache
// generation once the store has been quiet for Settle.
//
// Refresh is cheap: it compares the store's metadata (root and level
// zarr.json, the list of levels, where a linked root points) with what the
// current version was opened from, so its cost does not grow with the
// number of chunks. RefreshDeep also walks every object, for changes
// that touch data alone; a server runs it only when asked.
//
// A store that fails to open keeps its typed error, which callers serve,
// until a Refresh opens it.
type Handle struct {
	name string
	st   storage.Store
	o    Options
	w    Watch

	// lock allows one check or open at a time and guards gen, opened,
	// walked and quiet. It is a channel so that a request waits for it
	// only until its own deadline (see acquire): a check stuck on a hung
	// backend must not hold every request that needs the store.
	lock chan struct{}
	gen  uint64
	// retired: versions swapped out whose background work may still run
	// (stopped, not waited for); closed: Close has run, and a version
	// opened after builds nothing in the background.
	retired []*Store
	closed  bool
	// opened: some version has been served, so a later open is of a
	// changed store and waits for it to settle.
	opened bool
	// walked is the whole-store fingerprint of the last RefreshDeep.
	walked string
	// quiet is the whole-store fingerprint the last reopen found, and when
	// it was first found: a new version opens only once it has stood
	// for Settle.
	quiet struct {
		fp    string
		since time.Time
	}
	cur atomic.Pointer[handleState]
	// checks counts the checks begun (under lock), so Sync can tell
	// whether one began after it was called; lastCheck is when the latest
	// began (Watch.Now, UnixNano), so Sync checks at most once a second.
	checks    atomic.Uint64
	lastCheck atomic.Int64
}

// Watch configures change detection.
type Watch struct {
	// Enabled makes Refresh compare metadata and reads refuse objects
	// newer than the open version. Without it the store is taken as
	// immutable and Refresh only retries a failed open.
	Enabled bool
	// Settle is how long a changed store must have been quiet before its
	// new version is opened (default 2s). Until then requests that need
	// changed objects get ErrChanging, with the time left.
	Settle time.Duration
	// Now is the clock that spaces the checks Sync starts (default
	// time.Now).
	Now func() time.Time
	// Walk names every version by a listing of the whole store as well as
	// by its metadata, the first one included, for owners who rewrite data
	// in place (the server then also runs RefreshDeep). Without it a server
	// that opens the store after a change to data alone names the new
	// bytes as the old ones were named, and answers their ETags with 304;
	// with it every replica and every restart names the same objects the
	// same way. It costs a listing of the whole store at each open.
	Walk bool
}

type handleState struct {
	store *Store
	err   error
	meta  string    // metadata fingerprint the store was opened from
	since time.Time // reads of objects written at or after this are changes
	// changed is the newest modification seen after the open, zero while
	// none was: the store is due to reopen once it has settled.
	changed time.Time
}

// OpenHandle opens st like Open; an error to open is kept in the handle,
// not returned (ctx's own end is returned).
func OpenHandle(ctx context.Context, st storage.Store, o Options, w Watch) (*Handle, error) {
	if w.Settle <= 0 {
		w.Settle = 2 * time.Second
	}
	if w.Now == nil {
		w.Now = time.Now
	}
	h := &Handle{name: o.Name, st: st, o: o, w: w, lock: make(chan struct{}, 1)}
	h.cur.Store(&handleState{})
	h.lock <- struct{}{} // nobody else knows h yet
	defer h.release()
	next, err := h.open(ctx, nil)
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	h.cur.Store(next)
	return h, nil
}

// StaticHandle wraps an already-open store that is never refreshed.
func StaticHandle(s *Store) *Handle {
	h := &Handle{name: s.name, st: s.st, o: Options{Name: s.name}, w: Watch{Now: time.Now}, lock: make(chan struct{}, 1)}
	h.cur.Store(&handleState{store: s})
	return h
}

// Name is the store's name.
func (h *Handle) Name() string { return h.name }

// Current returns the version of the store being served, or the error
// that keeps it from being served.
func (h *Handle) Current() (*Store, error) {
	c := h.cur.Load()
	if c.store == nil && c.err == nil {
		return nil, &Error{Kind: ErrCorrupt, Store: h.name, Level: -1, Err: fmt.Errorf("store is not open")}
	}
	if c.err != nil {
		return nil, c.err
	}
	return c.store, nil
}

// Pending reports whether s is the version served and a change to the
// store has been seen since it opened (a read met a newer or missing
// object, or a check found the metadata moved), not yet opened: s may
// still answer what its own objects hold, but no longer vouch that an
// answer given earlier is current.
func (h *Handle) Pending(s *Store) bool {
	c := h.cur.Load()
	return c.store == s && c.err == nil && !c.changed.IsZero()
}

// ChangingError says a store is being rewritten: no settled version of
// it can answer yet. Servers answer 503 with Retry-After.
type ChangingError struct {
	Store string
	// RetryAfter is how long the store must stay quiet before its new
	// version opens (at least a second).
	RetryAfter time.Duration
	// Unwatched: the store changed while it is served as immutable
	// (watching off); its new version is not opened until the server is
	// restarted, and RetryAfter is zero.
	Unwatched bool
	// ready is when the next open may succeed (RetryAfter is rounded up
	// for clients; the handle tries again at this time).
	ready time.Time
}

// changingUntil is a ChangingError for a store that may open at ready.
func (h *Handle) changingUntil(now, ready time.Time) *ChangingError {
	return &ChangingError{Store: h.name, RetryAfter: max(ready.Sub(now), time.Second), ready: ready}
}

func (e *ChangingError) Error() string {
	if e.Unwatched {
		return fmt.Sprintf("store %q changed while it is served as immutable (watching is off); its new version is served after a restart", e.Store)
	}
	return fmt.Sprintf("store %q is being changed; its new version opens once it has been quiet for %s", e.Store, e.RetryAfter)
}

// Is makes errors.Is(err, ErrChanging) true.
func (e *ChangingError) Is(t error) bool { return t == ErrChanging }

// Changed is called when a read of s (this handle's store) met an object
// written after s was opened (err matches storage.ErrChanged). It returns
// the version to answer from instead: a newer one if the store has
// settled (opened now if need be), else a *ChangingError. A handle that
// does not watch never reopens on its own: it returns a *ChangingError
// marked Unwatched. Waiting for a check in progress ends with ctx.
func (h *Handle) Changed(ctx context.Context, s *Store, err error) (*Store, error) {
	if !h.w.Enabled {
		return nil, &ChangingError{Store: h.name, Unwatched: true}
	}
	at := storage.ChangedAt(err)
	if err := h.acquire(ctx); err != nil {
		return nil, err
	}
	defer h.release()
	cur := h.cur.Load()
	if cur.store != s || cur.err != nil {
		return h.Current() // already reopened (or failed) by someone else
	}
	var me *missingError
	if errors.As(err, &me) && cur.changed.IsZero() {
		return h.missing(ctx, cur, err, me)
	}
	if at.IsZero() {
		at = h.st.Now()
	}
	if at.After(cur.changed) {
		next := *cur
		next.changed = at
		h.cur.Store(&next)
		cur = &next
	}
	return h.reopenIfSettled(ctx, cur)
}

// missing answers Changed for a read of cur's store that found an object
// the version has missing, with no change known yet (h.lock held). It is
// a change when the store's metadata moved too (a sync's delete phase, a
// re-pointed root): checked now, at most once a second, and answered as
// any change. Otherwise the store lacks an object its own metadata names,
// and the read fails as corrupt there; nothing reopens.
func (h *Handle) missing(ctx context.Context, cur *handleState, err error, me *missingError) (*Store, error) {
	if h.w.Now().Sub(time.Unix(0, h.lastCheck.Load())) >= syncEvery {
		if _, cerr := h.refreshLocked(ctx, false); cerr != nil && !errors.Is(cerr, ErrChanging) {
			return nil, cerr
		}
		if now := h.cur.Load(); now.store != cur.store || now.err != nil {
			return h.Current() // the check opened the new version
		}
		cur = h.cur.Load()
	}
	if !cur.changed.IsZero() {
		return h.reopenIfSettled(ctx, cur)
	}
	out := &Error{Kind: ErrCorrupt, Store: h.name, Level: -1, Err: fmt.Errorf("object %s is missing, and the store's metadata has not changed", me.key)}
	var ze *Error
	if errors.As(err, &ze) {
		out.Level, out.Array, out.Chunk = ze.Level, ze.Array, ze.Chunk
	}
	return nil, out
}

// reopenIfSettled opens the new version of a store known to have changed
// (cur serves), once it has been quiet for Settle; until then it keeps
// serving the old version for what that version can answer and reports
// ErrChanging. A new version that fails to open never replaces the one
// that works: the open's error is returned and the next try waits Settle.
func (h *Handle) reopenIfSettled(ctx context.Context, cur *handleState) (*Store, error) {
	if now, ready := h.st.Now(), cur.changed.Add(h.w.Settle); ready.After(now) {
		return nil, h.changingUntil(now, ready)
	}
	next, err := h.open(ctx, cur)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err // cancelled mid-open: nothing was learnt
		}
		// Still being written, or broken, or the backend failed mid-open:
		// the old version keeps answering what it can; the next try is
		// when the open said it may succeed, else after Settle.
		ready := h.st.Now().Add(h.w.Settle)
		if ce := (*ChangingError)(nil); errors.As(err, &ce) {
			ready = ce.ready
			if ready.IsZero() {
				ready = h.st.Now().Add(ce.RetryAfter)
			}
		}
		if t := ready.Add(-h.w.Settle); t.After(cur.changed) {
			upd := *cur
			upd.changed = t
			h.cur.Store(&upd)
		}
		return nil, err
	}
	h.swap(cur, next)
	return next.store, nil
}

// Refresh reopens the store if its metadata changed, if a read found it
// changed and it has settled since, or if it failed to open before. It
// reports whether what is served changed; the error is the reopen's (now
// served, when no version worked before), or the check's own, or that of
// a new version that does not open (what was served before is still
// served). Waiting for a check in progress ends with ctx.
func (h *Handle) Refresh(ctx context.Context) (bool, error) { return h.refresh(ctx, false) }

// RefreshDeep is Refresh that also lists every object of the store, so a
// change to data alone (a chunk rewritten in place, nothing else) is
// found too. Its cost grows with the number of objects; servers run it
// only when an operator asks (--revalidate-walk).
func (h *Handle) RefreshDeep(ctx context.Context) (bool, error) { return h.refresh(ctx, true) }

func (h *Handle) refresh(ctx context.Context, deep bool) (bool, error) {
	if err := h.acquire(ctx); err != nil {
		return false, err
	}
	defer h.release()
	return h.refreshLocked(ctx, deep)
}

// acquire takes h.lock, or gives up when ctx ends first: a request waits
// for a store's check only until its own deadline.
func (h *Handle) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store %q: %w", h.name, err)
	}
	select {
	case h.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("store %q: waiting for its check: %w", h.name, ctx.Err())
	}
}

func (h *Handle) release() { <-h.lock }

// syncEvery spaces the checks Sync starts: a paging cursor of a version
// this handle has not served costs at most one check a second, however
// many arrive (a forged one is as cheap as a stale one).
const syncEvery = time.Second

// Sync is Refresh for a request that has seen a sign of a version this
// handle may not have seen yet (a paging cursor another replica issued):
// unless a check began after the call, or one began less than a second
// ago, it checks the store now. It returns the version then served, or a
// *ChangingError while a change the check found settles. Concurrent calls
// share checks, so a burst of them costs about one check, not one each.
func (h *Handle) Sync(ctx context.Context) (*Store, error) {
	before := h.checks.Load()
	if err := h.acquire(ctx); err != nil {
		return nil, err
	}
	defer h.release()
	if h.checks.Load() == before && h.w.Now().Sub(time.Unix(0, h.lastCheck.Load())) >= syncEvery {
		if changed, err := h.refreshLocked(ctx, false); err != nil && !changed {
			return nil, err // the check itself failed
		}
	}
	if cur := h.cur.Load(); cur.store != nil && cur.err == nil && !cur.changed.IsZero() {
		return nil, h.changingUntil(h.st.Now(), cur.changed.Add(h.w.Settle))
	}
	return h.Current()
}

// refreshLocked is refresh with h.lock held.
func (h *Handle) refreshLocked(ctx context.Context, deep bool) (bool, error) {
	h.checks.Add(1)
	h.lastCheck.Store(h.w.Now().UnixNano())
	cur := h.cur.Load()
	if cur.err != nil || cur.store == nil {
		next, err := h.open(ctx, cur)
		if err != nil && ctx.Err() != nil {
			return false, err
		}
		if errors.Is(err, ErrChanging) && errors.Is(cur.err, ErrChanging) {
			return false, err
		}
		h.swap(cur, next)
		return true, err
	}
	if !h.w.Enabled {
		return false, nil
	}
	if cur.changed.IsZero() {
		view, root, err := h.pin(ctx)
		if err != nil {
			return false, err
		}
		meta, newest, err := metaFingerprint(ctx, view, root)
		if err != nil {
			return false, err
		}
		if meta != cur.meta {
			cur = h.noteChange(cur, newest)
		} else if deep {
			fp, newestObj, err := walkFingerprint(ctx, view)
			if err != nil {
				return false, err
			}
			prev := h.walked
			h.walked = fp
			switch {
			case !newestObj.Before(cur.since):
				cur = h.noteChange(cur, newestObj)
			case prev != "" && prev != fp:
				cur = h.noteChange(cur, h.st.Now())
			}
		}
	}
	if cur.changed.IsZero() {
		return false, nil
	}
	if _, err := h.reopenIfSettled(ctx, cur); err != nil {
		if errors.Is(err, ErrChanging) {
			return false, nil // still being written; the old version serves
		}
		return false, err // the new version does not open; the old one serves
	}
	return true, nil
}

func (h *Handle) noteChange(cur *handleState, at time.Time) *handleState {
	if at.IsZero() {
		at = h.st.Now()
	}
	next := *cur
	next.changed = at
	h.cur.Store(&next)
	return &next
}

// swap makes next current and retires the old version: its cache
// entries, and its background work (stopped here, waited for by Close).
func (h *Handle) swap(cur, next *handleState) {
	h.cur.Store(next)
	h.walked = ""
	if h.closed && next.store != nil {
		next.store.builds.stop()
	}
	if cur.store != nil && cur.store != next.store {
		if h.o.Cache != nil {
			h.o.Cache.Retire(cur.store.cachePrefix)
		}
		cur.store.builds.stop()
		h.retired = slices.DeleteFunc(h.retired, func(s *Store) bool { return s.builds.running.Load() == 0 })
		h.retired = append(h.retired, cur.store)
	}
}

// Close ends the background work (level-table builds) of every version
// of the store the handle has opened, and waits for it. The store still
// answers after Close, from its chunks.
func (h *Handle) Close() error {
	h.lock <- struct{}{}
	defer h.release()
	h.closed = true
	if s := h.cur.Load().store; s != nil {
		_ = s.Close()
	}
	for _, s := range h.retired {
		_ = s.Close()
	}
	h.retired = nil
	return nil
}

func (h *Handle) pin(ctx context.Context) (storage.Store, string, error) {
	return storage.Pin(ctx, h.st)
}

// open opens the store as it is now; prev is the state it replaces (nil
// at first). Once a version has been served, a new one opens only when the
// store's metadata has been quiet for Settle (the writer may still be at
// work) and refuses objects written within Settle before it opened; a
// first open serves what is there.
func (h *Handle) open(ctx context.Context, prev *handleState) (*handleState, error) {
	fail := func(err error) (*handleState, error) {
		err = h.wrapErr(err)
		return &handleState{err: err}, err
	}
	view, root, err := h.pin(ctx)
	if err != nil {
		return fail(err)
	}
	t0 := view.Now()
	since := t0
	if h.opened {
		since = t0.Add(-h.w.Settle)
	}
	meta, walked := "", ""
	if h.w.Enabled {
		var newest time.Time
		if meta, newest, err = metaFingerprint(ctx, view, root); err != nil {
			return fail(err)
		}
		if h.opened && !newest.Before(since) {
			return fail(h.changingUntil(t0, newest.Add(h.w.Settle)))
		}
		if h.w.Walk && !h.opened {
			if walked, _, err = walkFingerprint(ctx, view); err != nil {
				return fail(err)
			}
		}
		if h.opened {
			// Writers replace a store object by object, metadata among the
			// first or the last, and prune the old version's extra keys at
			// the end: a version is whole only once every key has stood
			// still for Settle. A listing of the whole store (keys, sizes,
			// versions) sees puts and deletes alike. The first one after a
			// version opened is dated by its newest object; one that differs
			// from an earlier listing saw a change that times may not show
			// (a delete), dated now. It runs only while a change is pending.
			var newestObj time.Time
			if walked, newestObj, err = walkFingerprint(ctx, view); err != nil {
				return fail(err)
			}
			if walked != h.quiet.fp {
				at := newestObj
				if h.quiet.fp != "" {
					at = t0
				}
				h.quiet.fp, h.quiet.since = walked, at
			}
			if ready := h.quiet.since.Add(h.w.Settle); ready.After(t0) {
				return fail(h.changingUntil(t0, ready))
			}
			h.quiet.fp = "" // settled: the next change is dated afresh
		}
		view = storage.Since(view, since)
	}
	h.gen++
	o := h.o
	o.gen = h.gen
	o.revisionSeed = meta
	o.watched = h.w.Enabled
	if h.w.Enabled && h.w.Walk || prev != nil && prev.store != nil && meta == prev.meta && !prev.changed.IsZero() {
		// Data changed and metadata did not (or, with Walk, may have):
		// what the objects are now tells the two versions (and their
		// ETags) apart, the same on every replica that reopened, whenever
		// it looked.
		o.revisionSeed += "\x00data " + walked
	}
	s, err := Open(ctx, view, o)
	if err != nil {
		if errors.Is(err, storage.ErrChanged) {
			at := storage.ChangedAt(err)
			return fail(h.changingUntil(t0, at.Add(h.w.Settle)))
		}
		return fail(err)
	}
	h.opened = true
	return &handleState{store: s, meta: meta, since: since}, nil
}

func (h *Handle) wrapErr(err error) error {
	var ze *Error
	var ce *ChangingError
	if errors.As(err, &ze) || errors.As(err, &ce) {
		return err
	}
	return &Error{Kind: kindOf(err), Store: h.name, Level: -1, Err: err}
}

// metaFingerprint summarises what identifies a version of a store without
// reading its data: the root's zarr.json, the list of levels and each
// level's zarr.json (size, version and modification time of each), and
// where a linked root points. Its cost is a listing and a stat per level.
// newest is the latest modification among them.
func metaFingerprint(ctx context.Context, st storage.Store, root string) (string, time.Time, error) {
	h := sha256.New()
	var newest time.Time
	add := func(key string) error {
		a, err := st.Stat(ctx, key)
		switch {
		case errors.Is(err, storage.ErrNotFound):
			fmt.Fprintf(h, "%s\x00-\x00", key)
			return nil
		case err != nil:
			return err
		}
		if a.Modified.After(newest) {
			newest = a.Modified
		}
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00%d\x00", key, a.Size, a.ETag, a.Modified.UnixNano())
		return nil
	}
	fmt.Fprintf(h, "root\x00%s\x00", root)
	if err := add("zarr.json"); err != nil {
		return "", newest, err
	}
	l, err := st.List(ctx, "")
	if err != nil {
		return "", newest, err
	}
	levels := make([]string, 0, len(l.Prefixes))
	for _, p := range l.Prefixes {
		name := strings.TrimSuffix(p, "/")
		if n, err := strconv.Atoi(name); err == nil && n >= 0 && strconv.Itoa(n) == name {
			levels = append(levels, name)
		}
	}
	sort.Strings(levels)
	for _, n := range levels {
		if err := add(n + "/zarr.json"); err != nil {
			return "", newest, err
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:16]), newest, nil
}

// walkFingerprint summarises every object under st (see Fingerprint) and
// returns the newest modification time among them.
func walkFingerprint(ctx context.Context, st storage.Store) (string, time.Time, error) {
	var newest time.Time
	fp, err := fingerprint(ctx, st, func(a storage.Attrs) {
		if a.Modified.After(newest) {
			newest = a.Modified
		}
	})
	return fp, newest, err
}

// Fingerprint summarises every object under st: it changes when any key
// is added, removed, resized or rewritten with new content. It is an
// order-independent sum of per-object hashes, so the listing is never
// held in memory. It costs a listing of the whole store.
func Fingerprint(ctx context.Context, st storage.Store) (string, error) {
	return fingerprint(ctx, st, nil)
}

func fingerprint(ctx context.Context, st storage.Store, each func(storage.Attrs)) (string, error) {
	var a, b, n uint64
	err := st.Walk(ctx, "", func(key string, at storage.Attrs) error {
		if each != nil {
			each(at)
		}
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
