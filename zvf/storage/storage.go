// Package storage is the one small interface the rest of zvfserve reads
// stores through. Backends live in subpackages (localfs for local folders,
// blobstore for gocloud.dev/blob URLs); so do the decorators (metered,
// which reports each read to an observer) and faultstore, a test double
// that injects faults. Transient failures are retried by the cloud SDKs
// alone, not here. Keys are slash-separated and relative to the store
// root; they never start with "/".
//
// Every read is bounded (ReadOptions.Max) and reports the version of the
// object it came from (Object.Attrs), so the reader can refuse bytes newer
// than the store version an answer started from (see Since).
package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// Store reads one hierarchy. Implementations must be safe for concurrent use
// and must honour ctx cancellation in every call, returning when ctx ends
// even if the backend itself does not.
type Store interface {
	// Get reads the object at key, or the part of it that o names. A
	// missing key returns an error for which errors.Is(err, ErrNotFound)
	// is true; an answer longer than o.Max bytes is ErrTooLarge, found
	// without reading more than o.Max+1 bytes.
	Get(ctx context.Context, key string, o ReadOptions) (Object, error)
	// List returns the direct children of prefix (which is "" or ends in
	// "/"): Keys are objects directly under prefix, Prefixes are "folders"
	// (each ends in "/"). Both are full keys, sorted.
	List(ctx context.Context, prefix string) (Listing, error)
	// Stat reports the size and version of one object.
	Stat(ctx context.Context, key string) (Attrs, error)
	// Walk calls fn for every object under prefix ("" or ending in "/"),
	// at any depth, with its size and version, in no particular order.
	// Folders that cannot be read and are not needed are skipped (see the
	// backend's doc). It is for whole-store checks an operator asks for.
	Walk(ctx context.Context, prefix string, fn func(key string, a Attrs) error) error
	// Now is the backend's present time as its modification times would
	// record it (truncated to their granularity): an object whose
	// Attrs.Modified is at or after a moment's Now was written after it.
	Now() time.Time
	// Close releases the backend.
	Close() error
}

// ReadOptions bound and pin one read.
type ReadOptions struct {
	Off int64 // first byte
	// Len is the number of bytes wanted; negative means to the end of the
	// object. A range past the end returns the bytes available.
	Len int64
	// Max is the most bytes the caller accepts (required, > 0): a read
	// that would return more fails with ErrTooLarge.
	Max int64
	// IfMatch, when set, is the version (Attrs.ETag) the object must still
	// have; otherwise the read fails with ErrChanged. Reads of one object
	// in several pieces pin the later ones to the first.
	IfMatch string
}

// Whole reads a whole object of at most max bytes.
func Whole(max int64) ReadOptions { return ReadOptions{Len: -1, Max: max} }

// Range reads n bytes at off (n is also the bound).
func Range(off, n int64) ReadOptions { return ReadOptions{Off: off, Len: n, Max: n} }

// Object is what a read returns: bytes and the version they belong to.
type Object struct {
	Data  []byte
	Attrs Attrs
}

// Writer is a Store that can also be written: the ZVF writer and tests use
// it. Put replaces the whole object.
type Writer interface {
	Store
	Put(ctx context.Context, key string, data []byte) error
	Delete(ctx context.Context, key string) error
}

// Listing is the result of Store.List.
type Listing struct {
	Keys     []string
	Prefixes []string
}

// Attrs describes one stored object.
type Attrs struct {
	Size int64
	// ETag is an opaque version token that changes when the object does.
	ETag string
	// Modified is when the object was last written (for local files the
	// later of its modification and status-change times, so a file moved
	// into place with an old mtime still counts as new); zero if unknown.
	Modified time.Time
}

// Sentinel errors; test them with errors.Is.
var (
	// ErrNotFound marks a missing key.
	ErrNotFound = errors.New("not found")
	// ErrUnavailable marks a backend that could not be reached or refused
	// the request for reasons unrelated to the key (network, throttling,
	// 5xx). Servers map it to 502/503.
	ErrUnavailable = errors.New("storage unavailable")
	// ErrTooLarge marks an object (or range) larger than its reader's bound.
	ErrTooLarge = errors.New("object larger than expected")
	// ErrNotRegular marks a key that is not a regular file (a FIFO, a
	// device, a folder), which is never read.
	ErrNotRegular = errors.New("not a regular file")
	// ErrOutside marks a key that resolves outside the store's root (a
	// symbolic link leading out), which is never read.
	ErrOutside = errors.New("leads outside the store")
	// ErrChanged marks an object written after the version being read
	// (see Since), or no longer at the version a read was pinned to.
	ErrChanged = errors.New("object changed")
	// ErrPermission marks a key the backend will not let this server read
	// (a local file's permissions, an object store's access policy): the
	// server's setup, not the data nor the client, is at fault. It is
	// fs.ErrPermission, so an *os.PathError for EACCES matches it too.
	ErrPermission = fs.ErrPermission
)

// Error wraps a backend failure with the operation and key it concerns.
// Its text names only the store-relative key, never a local path.
type Error struct {
	Op  string // "get", "list", "stat", "walk"
	Key string
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("storage %s %q: %v", e.Op, e.Key, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// SetupError is a backend failure that only the server's operator can
// fix, such as a cloud client finding no credentials to sign with. Its
// text is a sentence saying what to set, instead of the SDK's chain of
// wrapped messages (that stays reachable through Unwrap). It is an
// ErrPermission: the server's setup is at fault, and retrying will not
// help until the operator acts.
type SetupError struct {
	Msg string
	Err error
}

func (e *SetupError) Error() string        { return e.Msg }
func (e *SetupError) Unwrap() error        { return e.Err }
func (e *SetupError) Is(target error) bool { return target == ErrPermission }

// ChangedError is an ErrChanged with the modification time that gave the
// change away (zero when a pinned version no longer matched).
type ChangedError struct {
	Modified time.Time
}

func (e *ChangedError) Error() string {
	if e.Modified.IsZero() {
		return ErrChanged.Error()
	}
	return ErrChanged.Error() + " at " + e.Modified.UTC().Format(time.RFC3339Nano)
}

// Is makes errors.Is(err, ErrChanged) true.
func (e *ChangedError) Is(t error) bool { return t == ErrChanged }

// ChangedAt returns the modification time carried by an ErrChanged error,
// or zero.
func ChangedAt(err error) time.Time {
	var ce *ChangedError
	if errors.As(err, &ce) {
		return ce.Modified
	}
	return time.Time{}
}

// CheckBound validates a read's options; backends call it first.
func CheckBound(o ReadOptions) error {
	switch {
	case o.Off < 0:
		return fmt.Errorf("negative offset %d", o.Off)
	case o.Max <= 0:
		return fmt.Errorf("read without a size bound")
	case o.Len > o.Max:
		return fmt.Errorf("%w: %d bytes wanted, at most %d accepted", ErrTooLarge, o.Len, o.Max)
	}
	return nil
}

// Want is how many bytes a read of o returns from an object of size bytes,
// or ErrTooLarge when that exceeds o.Max.
func Want(o ReadOptions, size int64) (int64, error) {
	n := max(size-o.Off, 0)
	if o.Len >= 0 {
		n = min(n, o.Len)
	}
	if n > o.Max {
		return 0, fmt.Errorf("%w: %d bytes, at most %d accepted", ErrTooLarge, n, o.Max)
	}
	return n, nil
}

// ReadAll reads the whole object at key, refusing one over max bytes.
func ReadAll(ctx context.Context, st Store, key string, max int64) ([]byte, error) {
	obj, err := st.Get(ctx, key, Whole(max))
	return obj.Data, err
}

// Starter is a Store that starts a read and lets its caller collect the
// outcome later, without the caller giving the read a goroutine of its
// own: a local folder's reads run on one already (see localfs), a memory
// store's never block. Decorators forward it.
type Starter interface {
	// Start starts reading key as Get would; wait, called exactly once,
	// returns what Get would have. It returns when ctx ends, as Get does.
	Start(ctx context.Context, key string, o ReadOptions) (wait func() (Object, error))
}

// Read is one read of StartAll.
type Read struct {
	Key string
	Opt ReadOptions
}

// BatchStarter is a Starter that starts several reads at once on one
// goroutine of its own, made one after the other in order (a local
// folder's: one goroutine, not one a file). Decorators forward it.
type BatchStarter interface {
	Starter
	// StartAll starts the reads rs; waits[i], called exactly once,
	// returns what Get of rs[i] would have, as Start's wait does.
	StartAll(ctx context.Context, rs []Read) (waits []func() (Object, error))
}

// StartAll starts the reads rs from st, in order: through st's own
// StartAll when it is a BatchStarter; else all but the first as Start
// starts them, and the first is read by a Get when its wait is called,
// on the caller's goroutine (which would otherwise only wait). The
// caller must call each wait exactly once.
func StartAll(ctx context.Context, st Store, rs []Read) (waits []func() (Object, error)) {
	if b, ok := st.(BatchStarter); ok {
		return b.StartAll(ctx, rs)
	}
	waits = make([]func() (Object, error), len(rs))
	for i, r := range rs {
		if i == 0 {
			waits[i] = func() (Object, error) { return st.Get(ctx, r.Key, r.Opt) }
			continue
		}
		waits[i] = Start(ctx, st, r.Key, r.Opt)
	}
	return waits
}

// Start starts reading key from st: through st's own Start when it is a
// Starter, else by a Get on a goroutine of its own (a panic in it becomes
// the read's error). The caller must call wait exactly once.
func Start(ctx context.Context, st Store, key string, o ReadOptions) (wait func() (Object, error)) {
	if s, ok := st.(Starter); ok {
		return s.Start(ctx, key, o)
	}
	type result struct {
		obj Object
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			if v := recover(); v != nil {
				r = result{err: &Error{Op: "get", Key: key, Err: fmt.Errorf("read panicked: %v", v)}}
			}
			done <- r
		}()
		r.obj, r.err = st.Get(ctx, key, o)
	}()
	return func() (Object, error) {
		r := <-done
		return r.obj, r.err
	}
}

// Pinner is a Store whose root can be re-pointed while it is served (a
// local folder reached through a symbolic link): Pin returns a view bound
// to what the root resolves to now, and an identity of that root that
// changes when it is re-pointed. Decorators that wrap a Store forward it.
type Pinner interface {
	Pin(ctx context.Context) (Store, string, error)
}

// Pin pins st if it is a Pinner; any other store is its own view, with
// no identity.
func Pin(ctx context.Context, st Store) (Store, string, error) {
	if p, ok := st.(Pinner); ok {
		return p.Pin(ctx)
	}
	return st, "", nil
}

// AbsenceDater is a Store that can date a key's absence: Absent returns
// when the nearest folder above key that exists last had an entry added or
// removed (zero when it cannot tell). A key missing from a folder
// unchanged since t was missing at t too; one missing from a folder
// changed since may have been deleted after t (see Since). Decorators that
// wrap a Store forward it.
type AbsenceDater interface {
	Absent(ctx context.Context, key string) (time.Time, error)
}

// Absent dates key's absence in st if st is an AbsenceDater; any other
// store cannot tell (zero).
func Absent(ctx context.Context, st Store, key string) (time.Time, error) {
	if d, ok := st.(AbsenceDater); ok {
		return d.Absent(ctx, key)
	}
	return time.Time{}, nil
}
