package neuroglancer

import (
	"fmt"
	"net/http"
)

// Error is a problem these routes find themselves (the reader's errors
// pass through unchanged). Kind is the last part of the problem type URI
// the API uses for the same kind of problem.
type Error struct {
	Status int
	Kind   string
	Detail string
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Kind, e.Detail) }

func badParam(detail string) *Error {
	return &Error{Status: http.StatusBadRequest, Kind: "bad-parameter", Detail: detail}
}

func notFoundf(format string, a ...any) *Error {
	return &Error{Status: http.StatusNotFound, Kind: "not-found", Detail: fmt.Sprintf(format, a...)}
}

func corruptf(format string, a ...any) *Error {
	return &Error{Status: http.StatusUnprocessableEntity, Kind: "corrupt-data", Detail: fmt.Sprintf(format, a...)}
}

func tooLargef(format string, a ...any) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Kind: "too-large", Detail: fmt.Sprintf(format, a...)}
}
