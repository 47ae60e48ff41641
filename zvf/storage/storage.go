// Package storage is the one small interface the rest of zvfserve reads
// stores through. Backends live in subpackages (blobstore for every
// gocloud.dev/blob URL and local paths; faultstore, a test double that
// injects faults). Keys are slash-separated and relative to the store root;
// they never start with "/".
package storage

import (
	"context"
	"errors"
	"fmt"
)

// Store reads one hierarchy. Implementations must be safe for concurrent use
// and must honour ctx cancellation in every call.
type Store interface {
	// Get returns the whole object at key. A missing key returns an error
	// for which errors.Is(err, ErrNotFound) is true.
	Get(ctx context.Context, key string) ([]byte, error)
	// GetRange returns length bytes starting at off. A negative length
	// means "to the end". Reading past the end returns the available bytes;
	// callers that need an exact length check it themselves.
	GetRange(ctx context.Context, key string, off, length int64) ([]byte, error)
	// List returns the direct children of prefix (which is "" or ends in
	// "/"): Keys are objects directly under prefix, Prefixes are "folders"
	// (each ends in "/"). Both are full keys, sorted.
	List(ctx context.Context, prefix string) (Listing, error)
	// Stat reports size and version (ETag or mtime-derived) of one object.
	Stat(ctx context.Context, key string) (Attrs, error)
	// Walk calls fn for every object under prefix ("" or ending in "/"),
	// at any depth, with its size and version, in no particular order. It
	// is how a server notices that a store's objects were replaced.
	Walk(ctx context.Context, prefix string, fn func(key string, a Attrs) error) error
	// Close releases the backend.
	Close() error
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
}

// ErrNotFound marks a missing key; test it with errors.Is.
var ErrNotFound = errors.New("not found")

// ErrUnavailable marks a backend that could not be reached or refused the
// request for reasons unrelated to the key (network, throttling, 5xx).
// Servers map it to 502/503.
var ErrUnavailable = errors.New("storage unavailable")

// Error wraps a backend failure with the operation and key it concerns.
type Error struct {
	Op  string // "get", "range", "list", "stat"
	Key string
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("storage %s %q: %v", e.Op, e.Key, e.Err) }
func (e *Error) Unwrap() error { return e.Err }
