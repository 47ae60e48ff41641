package zarr

import (
	"errors"
	"fmt"
)

// Error reports a failure reading or decoding one array, naming the array
// path, the chunk key (if any) and the codec (if any).
type Error struct {
	Path  string
	Chunk string
	Codec string
	Err   error
}

func (e *Error) Error() string {
	s := "zarr array " + quote(e.Path)
	if e.Chunk != "" {
		s += " chunk " + quote(e.Chunk)
	}
	if e.Codec != "" {
		s += " codec " + e.Codec
	}
	return s + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

func quote(s string) string { return fmt.Sprintf("%q", s) }

// Sentinel causes; test with errors.Is.
var (
	// ErrMetadata marks zarr.json that is not valid Zarr v3 metadata.
	ErrMetadata = errors.New("invalid metadata")
	// ErrUnsupported marks a codec, data type, grid or extension this
	// package does not implement and must not ignore.
	ErrUnsupported = errors.New("unsupported")
	// ErrCorrupt marks chunk bytes that do not decode to what the metadata
	// declares (truncated, wrong size, bad checksum).
	ErrCorrupt = errors.New("corrupt chunk")
	// ErrChecksum marks a crc32c mismatch (it also matches ErrCorrupt).
	ErrChecksum = fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	// ErrTooLarge marks an array or chunk larger than the codec
	// environment's Limits (it also matches ErrUnsupported: this server
	// refuses it, whether or not it is valid Zarr).
	ErrTooLarge = fmt.Errorf("%w: larger than the configured limit", ErrUnsupported)
)

func metaErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrMetadata, fmt.Sprintf(format, a...))
}

func corrupt(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, a...))
}

// tooLarge is the error for metadata that declares chunks beyond the
// limits: invalid for this server (ErrMetadata) and too large.
func tooLarge(format string, a ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrMetadata, ErrTooLarge, fmt.Sprintf(format, a...))
}

func unsupported(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupported, fmt.Sprintf(format, a...))
}
