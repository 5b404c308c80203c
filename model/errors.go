package model

import (
	"errors"
	"fmt"
	"time"
)

// Kind is the class of a domain error, spelled as the contract's error
// code (docs/api.md#errors). It says what the caller can do about the
// error; the HTTP layer turns it into a status code.
type Kind string

// The kinds of the contract.
const (
	KindInvalidArgument    Kind = "invalid_argument"
	KindUnauthenticated    Kind = "unauthenticated"
	KindPermissionDenied   Kind = "permission_denied"
	KindNotFound           Kind = "not_found"
	KindConflict           Kind = "conflict"
	KindPreconditionFailed Kind = "precondition_failed"
	KindTooLarge           Kind = "too_large"
	KindOverloaded         Kind = "overloaded"
	KindUnavailable        Kind = "unavailable"
	KindInternal           Kind = "internal"
)

// Kinds lists every kind, for exhaustive tests of their mappings.
var Kinds = []Kind{
	KindInvalidArgument, KindUnauthenticated, KindPermissionDenied, KindNotFound, KindConflict,
	KindPreconditionFailed, KindTooLarge, KindOverloaded, KindUnavailable, KindInternal,
}

// Known reports whether k is one of Kinds.
func (k Kind) Known() bool {
	for _, x := range Kinds {
		if k == x {
			return true
		}
	}
	return false
}

// Error is a domain error: what kind of failure, a message a person can act
// on, and for overloaded and unavailable how long to wait before a retry.
type Error struct {
	Kind       Kind
	Message    string
	RetryAfter time.Duration
	// Job, when set, is rendered next to the error: the job a 409 of a
	// DELETE or PUT is about (its callback has started: status firing).
	Job *Job
}

func (e *Error) Error() string { return string(e.Kind) + ": " + e.Message }

// Errorf returns an Error of kind k.
func Errorf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, args...)}
}

// AsError returns the *Error in err's chain, if there is one.
func AsError(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// IsKind reports whether err's chain holds an *Error of kind k.
func IsKind(err error, k Kind) bool {
	e, ok := AsError(err)
	return ok && e.Kind == k
}

// ErrOutcomeUnknown: a write whose effect could not be established (the
// slot's leader changed or became unreachable while it was in flight, and
// no leader could be asked afterwards within the time a request may take).
// It is not a contract error, because every contract error means "nothing
// changed": the HTTP layer answers it with no answer at all — the
// connection is closed — which every HTTP client already treats as "the
// outcome is unknown" (docs/api.md#errors).
var ErrOutcomeUnknown = errors.New("the outcome of the write is unknown")

// Invalid is an invalid_argument error: the request itself is wrong.
func Invalid(format string, args ...any) *Error {
	return Errorf(KindInvalidArgument, format, args...)
}

// NotFound is a not_found error.
func NotFound(format string, args ...any) *Error { return Errorf(KindNotFound, format, args...) }

// Conflict is a conflict error: the request contradicts the current state.
func Conflict(format string, args ...any) *Error { return Errorf(KindConflict, format, args...) }

// Firing is the conflict of a DELETE or PUT of a job whose callback has
// already started (docs/api.md#jobs): nothing changed, and the answer
// carries the job with status firing.
func Firing(j *Job) *Error {
	return &Error{Kind: KindConflict, Job: j, Message: fmt.Sprintf("job %q of collection %q is firing: its callback has started, so it can no longer be deleted or replaced before this attempt ends; read it again and retry once the attempt is over", j.ID, j.Collection)}
}

// PreconditionFailed is a precondition_failed error (If-Match).
func PreconditionFailed(format string, args ...any) *Error {
	return Errorf(KindPreconditionFailed, format, args...)
}

// TooLarge is a too_large error.
func TooLarge(format string, args ...any) *Error { return Errorf(KindTooLarge, format, args...) }

// Overloaded is an overloaded error: slow down, retry after retryAfter.
func Overloaded(retryAfter time.Duration, format string, args ...any) *Error {
	e := Errorf(KindOverloaded, format, args...)
	e.RetryAfter = retryAfter
	return e
}

// Unavailable is an unavailable error: retry after retryAfter (elsewhere,
// or once an election or a start has finished).
func Unavailable(retryAfter time.Duration, format string, args ...any) *Error {
	e := Errorf(KindUnavailable, format, args...)
	e.RetryAfter = retryAfter
	return e
}

// Internal is an internal error: a bug or an unexpected failure.
func Internal(format string, args ...any) *Error { return Errorf(KindInternal, format, args...) }
