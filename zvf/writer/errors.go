package writer

import "fmt"

// InputError reports caller input the writer refuses: which field, which
// element (-1 when not element-specific) and why. Nothing is written to
// the store before input validation passes.
type InputError struct {
	Field  string
	Index  int
	Reason string
}

func (e *InputError) Error() string {
	if e.Index >= 0 {
		return fmt.Sprintf("zvf writer: invalid %s[%d]: %s", e.Field, e.Index, e.Reason)
	}
	return fmt.Sprintf("zvf writer: invalid %s: %s", e.Field, e.Reason)
}

func inputErr(field string, index int, format string, args ...any) error {
	return &InputError{Field: field, Index: index, Reason: fmt.Sprintf(format, args...)}
}

// WriteError reports a failure to encode or store one key of the store.
type WriteError struct {
	Key string // full storage key
	Err error
}

func (e *WriteError) Error() string { return fmt.Sprintf("zvf writer: write %q: %v", e.Key, e.Err) }
func (e *WriteError) Unwrap() error { return e.Err }
