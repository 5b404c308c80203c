package httpapi

import (
	"fmt"
	"net/http"
	"time"
)

// Error is an API error: an HTTP status, the contract's code and a message
// a person can act on (API.md §3 "Errors"). The node returns these for
// every failure it can name; anything else is answered as 500 internal.
type Error struct {
	Status     int
	Code       string
	Message    string
	RetryAfter time.Duration // set for 503 unavailable and 429 overloaded
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// The contract's error codes.
const (
	CodeInvalidArgument    = "invalid_argument"
	CodeUnauthenticated    = "unauthenticated"
	CodeNotFound           = "not_found"
	CodeConflict           = "conflict"
	CodePreconditionFailed = "precondition_failed"
	CodeTooLarge           = "too_large"
	CodeOverloaded         = "overloaded"
	CodeUnavailable        = "unavailable"
	CodeInternal           = "internal"
)

func newErr(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid is a 400 invalid_argument.
func Invalid(format string, args ...any) *Error {
	return newErr(http.StatusBadRequest, CodeInvalidArgument, format, args...)
}

// NotFound is a 404 not_found.
func NotFound(format string, args ...any) *Error {
	return newErr(http.StatusNotFound, CodeNotFound, format, args...)
}

// Conflict is a 409 conflict.
func Conflict(format string, args ...any) *Error {
	return newErr(http.StatusConflict, CodeConflict, format, args...)
}

// PreconditionFailed is a 412 precondition_failed.
func PreconditionFailed(format string, args ...any) *Error {
	return newErr(http.StatusPreconditionFailed, CodePreconditionFailed, format, args...)
}

// TooLarge is a 413 too_large.
func TooLarge(format string, args ...any) *Error {
	return newErr(http.StatusRequestEntityTooLarge, CodeTooLarge, format, args...)
}

// Overloaded is a 429 overloaded with a Retry-After.
func Overloaded(retryAfter time.Duration, format string, args ...any) *Error {
	e := newErr(http.StatusTooManyRequests, CodeOverloaded, format, args...)
	e.RetryAfter = retryAfter
	return e
}

// Unavailable is a 503 unavailable with a Retry-After.
func Unavailable(retryAfter time.Duration, format string, args ...any) *Error {
	e := newErr(http.StatusServiceUnavailable, CodeUnavailable, format, args...)
	e.RetryAfter = retryAfter
	return e
}

// Internal is a 500 internal.
func Internal(format string, args ...any) *Error {
	return newErr(http.StatusInternalServerError, CodeInternal, format, args...)
}
