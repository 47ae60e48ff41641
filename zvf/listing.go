package zvf

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// ListingError: the chunks a level's listing found when it opened hold
// fewer vertices than the level declares (its vertex_count), and a
// listing taken since finds chunks that one lacked — an object store's
// listing that had not caught up with the store's writes (eventual
// consistency). The level's answers would be short without a word, so
// they are refused until the store is opened, and listed, again. It
// matches ErrChanged: a server reopens the store as for any change.
type ListingError struct {
	Store string
	Level int
	// Declared is the level's vertex_count; Listed what the chunks the
	// open's listing found hold.
	Declared, Listed int64
	// Missing is the first chunk (in key order) the new listing found and
	// the open's lacked; Count how many it found.
	Missing string
	Count   int
	// NamedBy, when not empty, is what named Missing and sent the level
	// to be listed again (an object's manifest, a cross-chunk link)
	// before its chunks were all read: Declared and Listed are then 0.
	NamedBy string
	// changed dates the change by the storage's clock when the new
	// listing was taken: however many answers meet the error, the store's
	// reopen waits for the same quiet time.
	changed *storage.ChangedError
}

func (e *ListingError) Error() string {
	more := ""
	if e.Count > 1 {
		more = fmt.Sprintf(" and %d more", e.Count-1)
	}
	if e.NamedBy != "" {
		return fmt.Sprintf("store %q level %d: the store's listing was incomplete when the level opened: chunk %s%s was not listed (%s names it, and it is there); retry once the store has been listed again",
			e.Store, e.Level, e.Missing, more, e.NamedBy)
	}
	return fmt.Sprintf("store %q level %d: the store's listing was incomplete when the level opened: chunk %s%s was not listed (the chunks listed hold %d of the %d vertices the level declares); retry once the store has been listed again",
		e.Store, e.Level, e.Missing, more, e.Listed, e.Declared)
}

// Unwrap makes the error a change (errors.Is(err, ErrChanged)), dated,
// so that the store is reopened, and listed again, as for a change.
func (e *ListingError) Unwrap() error { return e.changed }

// listCheck cross-checks a level's listing against its declared
// vertex_count, once every chunk listed has been decoded (see
// checkListing): it costs nothing on the warm path, which decodes no
// chunk.
type listCheck struct {
	chunks, rows atomic.Int64 // chunks decoded at least once, and their rows
	done         atomic.Bool  // checked: agreed, or cannot be checked
	bad          atomic.Pointer[ListingError]
	// relisted: a listing taken again found no chunk the open's lacked,
	// or not the one unlisted looked for (unlisted lists no more after
	// that; checkListing still does, once every chunk has been read).
	relisted atomic.Bool
	// retryAt (unix ns by the storage's clock, 0: none) is when a check
	// whose listing failed may list again; failures counts those in a row.
	retryAt  atomic.Int64
	failures atomic.Int32
	mu       sync.Mutex // one re-list at a time
}

// seenFirst counts chunk rows decoded for the first time in this version.
func (c *listCheck) seenFirst(rows int64) {
	c.rows.Add(rows)
	c.chunks.Add(1)
}

// relister is a layout whose chunks come from a listing of the store,
// which it can take again (ZVF 0.6/0.7; a 0.9 level declares its chunks in
// nonempty_chunks).
type relister interface {
	relist(ctx context.Context) ([]Key, error)
}

// checkListing runs after each chunk decoded afresh. Once every chunk
// the level's listing found has been decoded, their rows are compared
// with the level's declared vertex_count: fewer, and the level is listed
// again; chunks that listing finds and the open's lacked make the level's
// answers a *ListingError (Store.Level too) until the store is reopened.
// A new listing that agrees leaves the level served: its metadata, not
// its listing, is wrong (zvfserve validate reports it), and that is said
// once in the log.
func (l *Level) checkListing(ctx context.Context) error {
	c := &l.listed
	if c.done.Load() {
		if e := c.bad.Load(); e != nil {
			return e
		}
		return nil
	}
	// chunks before rows: seenFirst adds a chunk's rows before counting
	// it, so with every chunk counted the rows read next are all there.
	if c.chunks.Load() < int64(len(l.keys)) {
		return nil
	}
	rows := c.rows.Load()
	rl, ok := l.lay.(relister)
	if !ok || rows >= l.meta.VertexCount {
		c.done.Store(true)
		return nil
	}
	if at := c.retryAt.Load(); at != 0 && l.s.st.Now().UnixNano() < at {
		return nil // the last listing failed: not yet
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done.Load() {
		if e := c.bad.Load(); e != nil {
			return e
		}
		return nil
	}
	missing, err := l.relistMissing(ctx, rl)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		// Not done: a chunk decoded afresh after the wait checks again.
		// Meanwhile the answer goes out unchecked, as before the check: a
		// backend failing listings (its reads answering) must not fail
		// every answer that reads a chunk, each listing it again.
		n := c.failures.Add(1)
		wait := retryWait(n)
		c.retryAt.Store(l.s.st.Now().Add(wait).UnixNano())
		l.s.log.Warn("a level's chunks hold fewer vertices than its metadata declares, and listing it again failed; its answers go out unchecked, and the listing is tried again after a wait",
			"store", l.s.name, "level", l.n, "declared", l.meta.VertexCount, "held", rows, "err", err, "failures", n, "retry_in", wait)
		return nil
	}
	c.done.Store(true)
	if len(missing) == 0 {
		l.s.log.Warn("a level's chunks hold fewer vertices than its metadata declares, and listing it again finds no other chunk: its vertex_count is wrong (zvfserve validate reports it)",
			"store", l.s.name, "level", l.n, "declared", l.meta.VertexCount, "held", rows)
		return nil
	}
	e := &ListingError{Store: l.s.name, Level: l.n, Declared: l.meta.VertexCount, Listed: rows, Missing: missing[0], Count: len(missing)}
	l.listingFailed(e, missing)
	return e
}

// relistMissing lists the level again and returns the chunks (in key
// order) that listing has and the open's lacked; none, and the level is
// marked relisted.
func (l *Level) relistMissing(ctx context.Context, rl relister) ([]string, error) {
	keys, err := rl.relist(ctx)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, k := range keys {
		if !l.hasKey(k) {
			missing = append(missing, k.String())
		}
	}
	if len(missing) == 0 {
		l.listed.relisted.Store(true)
	}
	return missing, nil
}

// listingFailed makes e, dated now, the level's answer until the store is
// reopened (c.mu held), and logs it.
func (l *Level) listingFailed(e *ListingError, missing []string) {
	e.changed = &storage.ChangedError{Modified: l.s.st.Now()}
	l.listed.bad.Store(e)
	l.listed.done.Store(true)
	l.s.log.Warn("a level's listing was incomplete when it opened (the backend's listing had not caught up with its writes); its answers are 503 until the store is listed again",
		"store", l.s.name, "level", l.n, "declared", e.Declared, "listed", e.Listed, "named_by", e.NamedBy,
		"unlisted", strings.Join(missing[:min(len(missing), 5)], " "), "unlisted_count", len(missing))
}

// unlisted is the answer for chunk key, which the level's metadata names
// (what says so: namedBy) and its listing lacks, otherwise corrupt. The
// open's listing may not have caught up with the store's writes: the
// level is listed again, and a listing that has the chunk makes the
// level's answers a *ListingError, as checkListing does. It is listed
// again once at most while no listing finds more, so that metadata
// naming a chunk the store truly lacks (corrupt) costs each request no
// listing.
func (l *Level) unlisted(ctx context.Context, key Key, namedBy string, corrupt error) error {
	c := &l.listed
	if e := c.bad.Load(); e != nil {
		return e
	}
	rl, ok := l.lay.(relister)
	if !ok || c.relisted.Load() {
		return corrupt
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.bad.Load(); e != nil {
		return e
	}
	if c.relisted.Load() {
		return corrupt
	}
	missing, err := l.relistMissing(ctx, rl)
	if err != nil {
		return err
	}
	if len(missing) == 0 {
		return corrupt // relisted: the listing agreed
	}
	// The listing lacked chunks, this one or others: either way the
	// level's answers would be short, and marking it relisted would
	// stop the box check from finding the others.
	ks, by := key.String(), namedBy
	if !slices.Contains(missing, ks) {
		ks, by = missing[0], "a listing taken again for "+namedBy
	}
	e := &ListingError{Store: l.s.name, Level: l.n, Missing: ks, Count: len(missing), NamedBy: by}
	l.listingFailed(e, missing)
	return e
}
