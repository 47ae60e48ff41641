package cql2

import (
	"fmt"
	"unicode/utf8"
)

// Error is what is wrong with a filter: a syntax error (Pos is where, in
// characters from 0), a malformed CQL2 JSON document, or a filter that does
// not fit the queryables (Property names the property at fault). Its message
// names the offending property, literal or token, so that it can be shown to
// the user as it is. Every error this package returns for bad filter input is
// an *Error; a mistake of the caller (a column bound with the wrong type, a
// row outside the bound columns) is a plain error.
type Error struct {
	// Msg says what is wrong, with the position when there is one; Error
	// prefixes it with "filter: ".
	Msg string
	// Pos is the 0-based character (not byte) position of a syntax error in
	// the text, or of a JSON syntax error in the document; -1 when the error
	// has no position.
	Pos int
	// Property is the property the error is about, or "".
	Property string
}

func (e *Error) Error() string { return "filter: " + e.Msg }

// errorf is an error without position.
func errorf(format string, args ...any) *Error {
	return &Error{Msg: fmt.Sprintf(format, args...), Pos: -1}
}

// propErrorf is an error about property name.
func propErrorf(name, format string, args ...any) *Error {
	return &Error{Msg: fmt.Sprintf(format, args...), Pos: -1, Property: name}
}

// charPos is the character position of byte offset off in src (src is
// valid UTF-8 up to off, or counted bytewise where it is not).
func charPos(src string, off int) int {
	if off > len(src) {
		off = len(src)
	}
	return utf8.RuneCountInString(src[:off])
}
