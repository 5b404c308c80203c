package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Error codes of the contract (API.md §3, Errors).
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

// APIError is a non-2xx answer from the server. Code is the contract's
// machine-readable code and is what callers should branch on; Message is for
// people. RetryAfter is the server's Retry-After (zero when absent), set on
// 503 and 429 so a caller that gives up can still back off correctly.
type APIError struct {
	HTTPStatus int           `json:"-"`
	Code       string        `json:"code"`
	Message    string        `json:"message"`
	RetryAfter time.Duration `json:"-"`
}

func (e *APIError) Error() string {
	if e.HTTPStatus == 0 {
		return fmt.Sprintf("timemachine: %s: %s", e.Code, e.Message)
	}
	return fmt.Sprintf("timemachine: %s (HTTP %d): %s", e.Code, e.HTTPStatus, e.Message)
}

// errorBody is the inner object of the contract's error answer.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// maxRawMessage bounds how much of a non-contract error body is kept, so a
// proxy's HTML error page does not become a megabyte-long error string.
const maxRawMessage = 1024

// decodeError turns a non-2xx answer into an *APIError. A body that is not
// the contract's {"error":{"code","message"}} (a proxy, a panic page, plain
// text from /readyz) becomes Code "internal" with the raw text as message:
// the code is only trusted when the server said it.
func decodeError(status int, body []byte, retryAfter time.Duration) *APIError {
	e := &APIError{HTTPStatus: status, RetryAfter: retryAfter}
	var w struct {
		Error *errorBody `json:"error"`
	}
	if json.Unmarshal(body, &w) == nil && w.Error != nil && w.Error.Code != "" {
		e.Code, e.Message = w.Error.Code, w.Error.Message
		return e
	}
	e.Code = CodeInternal
	msg := bytes.TrimSpace(body)
	if len(msg) > maxRawMessage {
		msg = append(msg[:maxRawMessage:maxRawMessage], "…"...)
	}
	e.Message = string(msg)
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	return e
}

// parseRetryAfter reads a Retry-After value: delay-seconds or an HTTP date.
func parseRetryAfter(v []byte, now time.Time) time.Duration {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return 0
	}
	if n, err := strconv.ParseFloat(string(v), 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(n * float64(time.Second))
	}
	if t, err := http.ParseTime(string(v)); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// ErrorCode returns the contract error code of err (via errors.As), or "" if
// err is not an *APIError.
func ErrorCode(err error) string {
	var e *APIError
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// IsNotFound reports whether err is a not_found answer.
func IsNotFound(err error) bool { return ErrorCode(err) == CodeNotFound }

// IsConflict reports whether err is a conflict answer (e.g. a POST of an
// existing id with a different spec).
func IsConflict(err error) bool { return ErrorCode(err) == CodeConflict }

// IsPreconditionFailed reports whether err is a precondition_failed answer
// (an If-Match version that no longer holds).
func IsPreconditionFailed(err error) bool { return ErrorCode(err) == CodePreconditionFailed }

// IsInvalidArgument reports whether err is an invalid_argument answer.
func IsInvalidArgument(err error) bool { return ErrorCode(err) == CodeInvalidArgument }

// IsUnauthenticated reports whether err is an unauthenticated answer.
func IsUnauthenticated(err error) bool { return ErrorCode(err) == CodeUnauthenticated }

// IsTooLarge reports whether err is a too_large answer.
func IsTooLarge(err error) bool { return ErrorCode(err) == CodeTooLarge }

// IsOverloaded reports whether err is an overloaded (429) answer.
func IsOverloaded(err error) bool { return ErrorCode(err) == CodeOverloaded }

// IsUnavailable reports whether err is an unavailable (503) answer: no leader
// or no quorum for the slot. It changed nothing and may be retried later.
func IsUnavailable(err error) bool { return ErrorCode(err) == CodeUnavailable }

// IsInternal reports whether err is an internal answer, or a non-2xx answer
// whose body was not the contract's error shape.
func IsInternal(err error) bool { return ErrorCode(err) == CodeInternal }
