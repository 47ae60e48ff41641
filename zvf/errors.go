package zvf

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// Sentinel kinds; every error this package returns for bad input or a
// missing thing matches one of them with errors.Is, so callers (the HTTP
// layer) map them to statuses without parsing strings.
var (
	ErrNotFound    = errors.New("not found")           // level, object, group, chunk, attribute
	ErrBadQuery    = errors.New("bad query")           // caller's parameters
	ErrCorrupt     = errors.New("corrupt store data")  // bytes that contradict the format
	ErrUnsupported = errors.New("unsupported feature") // version, draco, layouts we refuse
	// ErrChanged: a read met an object written after the store version it
	// was answering from (it also matches storage.ErrChanged); the answer
	// is retried on the new version (Handle.Changed).
	ErrChanged = storage.ErrChanged
	// ErrChanging: the store is being rewritten and no settled version can
	// answer yet (a *ChangingError says for how long).
	ErrChanging = errors.New("store is changing")
	// ErrUnavailable: the storage backend could not be reached or refused
	// for reasons unrelated to the key (it also matches
	// storage.ErrUnavailable).
	ErrUnavailable = storage.ErrUnavailable
	// ErrPermission: the backend will not let the server read an object
	// (a local file's permissions, an object store's access policy); the
	// server's setup must change, retrying does not help (it also
	// matches storage.ErrPermission).
	ErrPermission = storage.ErrPermission
)

// Error names where a problem is: store, level, array and chunk.
type Error struct {
	Kind  error
	Store string
	Level int // -1 when not level-specific
	Array string
	Chunk string
	Err   error
}

func (e *Error) Error() string { return e.Location() + ": " + e.Err.Error() }

// storageFailures says, in order of precedence, what a client is told of
// a storage error of each kind (Detail).
var storageFailures = [...]struct {
	kind error
	msg  string
}{
	{storage.ErrTooLarge, "the stored object is larger than its metadata allows"},
	{storage.ErrNotRegular, "the stored object is not a regular file"},
	{storage.ErrOutside, "the stored object is a link that leads outside the store"},
	{storage.ErrNotFound, "the stored object is missing"},
	{storage.ErrChanged, "the stored object changed while it was read"},
	{storage.ErrUnavailable, "the storage backend could not be reached"},
	{storage.ErrPermission, "the server is not permitted to read the stored object"},
}

// Detail is the error as a client may see it: where it is, and what went
// wrong — except that what a storage backend said is replaced by the kind
// of failure, since it may carry sizes, paths or backend text (those go to
// the log).
func (e *Error) Detail() string {
	var se *storage.Error
	if !errors.As(e.Err, &se) {
		return e.Error()
	}
	msg := "the stored object could not be read"
	if se.Op == "walk" && errors.Is(se, storage.ErrTooLarge) {
		msg = "the store's folders hold more entries than a listing may visit in its bounds"
	} else {
		for _, k := range storageFailures {
			if errors.Is(se, k.kind) {
				msg = k.msg
				break
			}
		}
	}
	return e.Location() + ": " + msg
}

// Location names where the error is: store, level, array, chunk.
func (e *Error) Location() string {
	s := fmt.Sprintf("store %q", e.Store)
	if e.Level >= 0 {
		s += fmt.Sprintf(" level %d", e.Level)
	}
	if e.Array != "" {
		s += " array " + e.Array
	}
	if e.Chunk != "" {
		s += " chunk " + e.Chunk
	}
	return s
}

func (e *Error) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Kind, e.Err}
}

func (s *Store) errf(kind error, level int, array, chunk string, format string, a ...any) error {
	return &Error{Kind: kind, Store: s.name, Level: level, Array: array, Chunk: chunk, Err: fmt.Errorf(format, a...)}
}

func (s *Store) wrap(kind error, level int, array, chunk string, err error) error {
	var ze *Error
	if errors.As(err, &ze) {
		return err
	}
	return &Error{Kind: kind, Store: s.name, Level: level, Array: array, Chunk: chunk, Err: err}
}

// missingError is an object the open version has — its metadata, or the
// listing taken when it opened, says so — that storage no longer holds.
// It is a change (the delete phase of a sync, a re-pointed root) or a
// broken store: Handle.Changed tells which from the store's metadata.
type missingError struct{ key string }

func (e *missingError) Error() string {
	return "object " + e.key + " of the version being read is missing"
}

// Is makes a missing object a change (errors.Is(err, ErrChanged)).
func (e *missingError) Is(t error) bool { return t == ErrChanged }

// implied wraps err, met reading an object the open version has. On a
// watched store (one that can change while served) a missing object is a
// *missingError, never the object's absence; anything else, and every
// error of a store taken as immutable, is wrapped as s.wrap does.
func (s *Store) implied(err error, level int, array, chunk string) error {
	if !s.watched || !errors.Is(err, storage.ErrNotFound) {
		return s.wrap(kindOf(err), level, array, chunk, err)
	}
	key := join(join(strconv.Itoa(level), array), chunk)
	if level < 0 {
		key = array
	}
	var se *storage.Error
	if errors.As(err, &se) {
		key = se.Key
	}
	return &Error{Kind: ErrChanged, Store: s.name, Level: level, Array: array, Chunk: chunk, Err: &missingError{key: key}}
}
