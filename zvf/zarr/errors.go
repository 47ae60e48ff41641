package zarr

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
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

// JSONError is err, from decoding JSON metadata, as a sentence about the
// JSON: a value of the wrong type names the field and what it holds and
// should hold ("chunk_shape: a string where a list belongs"), never the
// Go type it was decoded into; encoding/json's text ("cannot unmarshal
// string into Go struct field rawNode.shape of type []int64") would reach
// an API client's problem detail. Syntax errors keep their text, without
// the "json: " prefix. Other errors are returned as they are.
func JSONError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field // the JSON keys' path (te.Struct is the Go type)
		if field == "" {
			field = "the document"
		}
		return fmt.Errorf("%s: %s where %s belongs", field, jsonArticle(te.Value), jsonKind(te.Type))
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("not valid JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	}
	return err
}

// jsonArticle names a JSON value kind as encoding/json reports it
// ("object", "array", "string", "number", "bool", "number 1e9").
func jsonArticle(v string) string {
	switch {
	case v == "object":
		return "an object"
	case v == "array":
		return "a list"
	case v == "bool":
		return "true or false"
	case strings.HasPrefix(v, "number "):
		return "the number " + strings.TrimPrefix(v, "number ")
	}
	return "a " + v
}

// jsonKind names the JSON a Go type decodes from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "another value"
}
