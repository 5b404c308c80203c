package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Error codes of the contract (docs/api.md#errors), with the HTTP status each
// comes with.
const (
	CodeInvalidArgument    = "invalid_argument"    // 400
	CodeUnauthenticated    = "unauthenticated"     // 401
	CodePermissionDenied   = "permission_denied"   // 403
	CodeNotFound           = "not_found"           // 404
	CodeConflict           = "conflict"            // 409
	CodePreconditionFailed = "precondition_failed" // 412
	CodeTooLarge           = "too_large"           // 413
	CodeOverloaded         = "overloaded"          // 429
	CodeUnavailable        = "unavailable"         // 503
	CodeInternal           = "internal"            // 500
)

// codeError is the type of the Err* sentinels: errors.Is(err, ErrNotFound)
// is true for an *Error whose Code is not_found.
type codeError string

func (c codeError) Error() string { return "timemachine: " + string(c) }

// Sentinels for errors.Is, one per contract code. They match an *Error
// (also inside a wrapped or joined error) by its Code.
var (
	ErrInvalidArgument    error = codeError(CodeInvalidArgument)
	ErrUnauthenticated    error = codeError(CodeUnauthenticated)
	ErrPermissionDenied   error = codeError(CodePermissionDenied)
	ErrNotFound           error = codeError(CodeNotFound)
	ErrConflict           error = codeError(CodeConflict)
	ErrPreconditionFailed error = codeError(CodePreconditionFailed)
	ErrTooLarge           error = codeError(CodeTooLarge)
	ErrOverloaded         error = codeError(CodeOverloaded)
	ErrUnavailable        error = codeError(CodeUnavailable)
	ErrInternal           error = codeError(CodeInternal)
)

// ArgumentError is a call the client refused before sending anything: an
// empty or dot-segment path parameter, a malformed address, options that
// do not go together. errors.Is(err, ErrInvalidArgument) holds for it, as
// for the server's 400, so one branch handles both; errors.As tells them
// apart (the CLI exits 2 for this one, a mistake on its command line).
type ArgumentError struct{ err error }

func (e *ArgumentError) Error() string { return e.err.Error() }

// Unwrap returns the cause, when the refusal wraps one (a CA file that
// cannot be read).
func (e *ArgumentError) Unwrap() error { return e.err }

// Is reports ErrInvalidArgument.
func (e *ArgumentError) Is(target error) bool { return target == ErrInvalidArgument }

func argErrorf(format string, a ...any) error { return &ArgumentError{fmt.Errorf(format, a...)} }

// ErrNotTimemachine matches a *ProtocolError: the answer was not what a
// timemachine server sends (an HTML page, another content type, JSON of
// another shape), so the address is probably not a timemachine API.
var ErrNotTimemachine = errors.New("not a timemachine API")

// Error is an error answer of the timemachine API,
// {"error":{"code":"…","message":"…"}}. Code is the contract's
// machine-readable code and what callers should branch on (errors.Is with
// the Err* sentinels, or the Is* helpers); Message is for people. By the
// contract, a request that got an Error changed nothing.
type Error struct {
	// HTTPStatus is the answer's status (for an item of a batch create,
	// the item's status).
	HTTPStatus int
	Code       string
	Message    string
	// RetryAfter is the server's Retry-After (zero when absent), sent with
	// 503 unavailable and 429 overloaded: a caller that gives up can still
	// back off as asked.
	RetryAfter time.Duration
	// Job is set when a 409 conflict carries the job it is about, such as a
	// job whose callback has already started (Status "firing").
	Job *Job
}

func (e *Error) Error() string {
	if e.HTTPStatus == 0 {
		return fmt.Sprintf("timemachine: %s: %s", e.Code, e.Message)
	}
	return fmt.Sprintf("timemachine: %s (HTTP %d): %s", e.Code, e.HTTPStatus, e.Message)
}

// Is makes errors.Is(err, ErrNotFound) and the other sentinels work.
func (e *Error) Is(target error) bool {
	c, ok := target.(codeError)
	return ok && string(c) == e.Code
}

// ProtocolError is an answer that is not the timemachine contract: a
// non-JSON content type, an HTML page, a body that does not decode into
// what the endpoint answers, a redirect. It matches ErrNotTimemachine.
type ProtocolError struct {
	Method      string
	URL         string // the request's URL
	Base        string // the address the request went to
	HTTPStatus  int
	ContentType string
	// Snippet is the start of the body, for the message.
	Snippet string
	// Err is the decoding error, when the body looked right but did not
	// decode.
	Err error
}

func (e *ProtocolError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "timemachine client: %s is not a timemachine API (got ", e.Base)
	ct := e.ContentType
	if ct == "" {
		ct = "no Content-Type"
	}
	fmt.Fprintf(&b, "%s, HTTP %d for %s %s", ct, e.HTTPStatus, e.Method, e.URL)
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.Snippet != "" {
		fmt.Fprintf(&b, ": %q", e.Snippet)
	}
	b.WriteString(")")
	return b.String()
}

// Is makes errors.Is(err, ErrNotTimemachine) work.
func (e *ProtocolError) Is(target error) bool { return target == ErrNotTimemachine }

// Unwrap returns the decoding error, if any.
func (e *ProtocolError) Unwrap() error { return e.Err }

// maxSnippet bounds how much of a foreign body goes into a message, so a
// proxy's error page does not become a page-long error string.
const maxSnippet = 200

func snippet(body []byte) string {
	s := strings.Join(strings.Fields(string(body)), " ")
	if len(s) > maxSnippet {
		cut := maxSnippet
		for cut > 0 && s[cut]&0xC0 == 0x80 { // do not split a UTF-8 sequence
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// errorBody is the contract's error answer, plus the job a conflict may
// carry.
type errorBody struct {
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Job *Job `json:"job"`
}

// decodeError turns a non-2xx answer into an *Error, or a *ProtocolError
// when the body is not the contract's error (the code is only trusted when
// the server said it).
func decodeError(r *result) error {
	var w errorBody
	if json.Unmarshal(r.body, &w) == nil && w.Error != nil && w.Error.Code != "" {
		return &Error{HTTPStatus: r.status, Code: w.Error.Code, Message: w.Error.Message, RetryAfter: r.retryAfter, Job: w.Job}
	}
	return r.protocolError(nil)
}

// isJSON reports whether a Content-Type is JSON (application/json or
// any +json type). An absent type is not refused here; the decoding
// decides.
func isJSON(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// parseRetryAfter reads a Retry-After value: delay-seconds (a fraction is
// accepted) or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		if n <= 0 || n != n {
			return 0
		}
		if n > float64(24*time.Hour/time.Second) {
			n = float64(24 * time.Hour / time.Second)
		}
		return time.Duration(n * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// ErrorCode returns the contract error code of err (via errors.As), or "" if
// err holds no *Error.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// IsInvalidArgument reports whether err is an invalid_argument answer.
func IsInvalidArgument(err error) bool { return errors.Is(err, ErrInvalidArgument) }

// IsUnauthenticated reports whether err is an unauthenticated answer: no
// token, or one the server does not know.
func IsUnauthenticated(err error) bool { return errors.Is(err, ErrUnauthenticated) }

// IsPermissionDenied reports whether err is a permission_denied answer: the
// token is known but its role or collections do not allow the call.
func IsPermissionDenied(err error) bool { return errors.Is(err, ErrPermissionDenied) }

// IsNotFound reports whether err is a not_found answer.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsConflict reports whether err is a conflict answer (e.g. a create of an
// existing id with a different spec, or a job whose callback has started).
func IsConflict(err error) bool { return errors.Is(err, ErrConflict) }

// IsPreconditionFailed reports whether err is a precondition_failed answer
// (an If-Match version that no longer holds).
func IsPreconditionFailed(err error) bool { return errors.Is(err, ErrPreconditionFailed) }

// IsTooLarge reports whether err is a too_large answer.
func IsTooLarge(err error) bool { return errors.Is(err, ErrTooLarge) }

// IsOverloaded reports whether err is an overloaded (429) answer.
func IsOverloaded(err error) bool { return errors.Is(err, ErrOverloaded) }

// IsUnavailable reports whether err is an unavailable (503) answer: no
// leader or no quorum for the slot. It changed nothing and may be retried
// after its RetryAfter.
func IsUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

// IsInternal reports whether err is an internal (500) answer.
func IsInternal(err error) bool { return errors.Is(err, ErrInternal) }

// RetryAfterOf returns the Retry-After of an *Error in err (0 if none).
func RetryAfterOf(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

// trimBody is the body without surrounding white space.
func trimBody(b []byte) []byte { return bytes.TrimSpace(b) }
