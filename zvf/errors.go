package zvf

import (
	"errors"
	"fmt"

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
