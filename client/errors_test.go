package client

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestErrorDecoding(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		body       string
		retryAfter string
		wantCode   string
		wantMsg    string
		wantRA     time.Duration
		sentinel   error
		is         func(error) bool
	}{
		{"invalid", 400, `{"error":{"code":"invalid_argument","message":"bad id"}}`, "", CodeInvalidArgument, "bad id", 0, ErrInvalidArgument, IsInvalidArgument},
		{"unauthenticated", 401, `{"error":{"code":"unauthenticated","message":"no token"}}`, "", CodeUnauthenticated, "no token", 0, ErrUnauthenticated, IsUnauthenticated},
		{"permission denied", 403, `{"error":{"code":"permission_denied","message":"reader may not write"}}`, "", CodePermissionDenied, "reader may not write", 0, ErrPermissionDenied, IsPermissionDenied},
		{"not found", 404, `{"error":{"code":"not_found","message":"job c/x does not exist"}}`, "", CodeNotFound, "job c/x does not exist", 0, ErrNotFound, IsNotFound},
		{"conflict", 409, `{"error":{"code":"conflict","message":"different spec"}}`, "", CodeConflict, "different spec", 0, ErrConflict, IsConflict},
		{"precondition", 412, `{"error":{"code":"precondition_failed","message":"version is 4"}}`, "", CodePreconditionFailed, "version is 4", 0, ErrPreconditionFailed, IsPreconditionFailed},
		{"too large", 413, `{"error":{"code":"too_large","message":"meta over 64 KiB"}}`, "", CodeTooLarge, "meta over 64 KiB", 0, ErrTooLarge, IsTooLarge},
		{"overloaded keeps Retry-After", 429, `{"error":{"code":"overloaded","message":"slow down"}}`, "1", CodeOverloaded, "slow down", time.Second, ErrOverloaded, IsOverloaded},
		{"unavailable keeps Retry-After", 503, `{"error":{"code":"unavailable","message":"no leader"}}`, "2", CodeUnavailable, "no leader", 2 * time.Second, ErrUnavailable, IsUnavailable},
		{"internal", 500, `{"error":{"code":"internal","message":"boom"}}`, "", CodeInternal, "boom", 0, ErrInternal, IsInternal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			transports(t, func(t *testing.T, opt Option) {
				f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
					if tc.retryAfter != "" {
						w.Header().Set("Retry-After", tc.retryAfter)
					}
					reply(w, tc.status, tc.body)
				})
				c := newClient(t, []string{f.addr()}, WithMaxAttempts(1), opt)
				_, err := c.GetJob(context.Background(), "c", "x")
				var apiErr *Error
				if !errors.As(err, &apiErr) {
					t.Fatalf("err = %v (%T), want *Error", err, err)
				}
				if apiErr.HTTPStatus != tc.status || apiErr.Code != tc.wantCode || apiErr.Message != tc.wantMsg || apiErr.RetryAfter != tc.wantRA {
					t.Errorf("got %+v, want status %d code %q message %q retry-after %v", *apiErr, tc.status, tc.wantCode, tc.wantMsg, tc.wantRA)
				}
				if !errors.Is(err, tc.sentinel) || !tc.is(err) || !errors.Is(errors.Join(errors.New("x"), err), tc.sentinel) {
					t.Errorf("sentinel/helper does not recognise %v", err)
				}
				for _, other := range []error{ErrNotFound, ErrConflict, ErrNotTimemachine} {
					if other != tc.sentinel && errors.Is(err, other) {
						t.Errorf("%v matches %v", err, other)
					}
				}
				if ErrorCode(err) != tc.wantCode || RetryAfterOf(err) != tc.wantRA {
					t.Errorf("ErrorCode = %q, RetryAfterOf = %v", ErrorCode(err), RetryAfterOf(err))
				}
				if want := "timemachine: " + tc.wantCode + " (HTTP "; !strings.HasPrefix(err.Error(), want) {
					t.Errorf("message %q", err)
				}
			})
		})
	}
	if IsNotFound(errors.New("x")) || ErrorCode(nil) != "" || RetryAfterOf(nil) != 0 {
		t.Error("helpers must be false for non-API errors")
	}
}

// TestConflictCarriesJob: a job whose callback has started answers 409 with
// the job, so a caller can see why.
func TestConflictCarriesJob(t *testing.T) {
	f := newFake(t, fixed(409, `{"error":{"code":"conflict","message":"job c/j1 is firing"},"job":{"id":"j1","status":"firing","attempts":1}}`))
	c := newClient(t, []string{f.addr()})
	err := c.DeleteJob(context.Background(), "c", "j1")
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrConflict) || e.Job == nil || e.Job.Status != StatusFiring || e.Job.Attempts != 1 {
		t.Fatalf("err = %v (job %+v)", err, e)
	}
	if len(f.requests()) != 1 {
		t.Error("a conflict must not be resent")
	}
}

// TestNotTimemachine: answers that are not the contract give a clear,
// bounded error naming the address, never a dump nor a contract code.
func TestNotTimemachine(t *testing.T) {
	html := "<!DOCTYPE html><html><head><title>Welcome to nginx!</title></head><body>" + strings.Repeat("<p>filler</p>", 200) + "</body></html>"
	tests := []struct {
		name    string
		status  int
		ctype   string
		body    string
		call    string // "get" or "list"
		wantSub []string
	}{
		{"HTML page on 200", 200, "text/html; charset=utf-8", html, "get", []string{"is not a timemachine API (got text/html; charset=utf-8, HTTP 200 for GET", "Welcome to nginx!"}},
		{"HTML page on 404", 404, "text/html", html, "get", []string{"is not a timemachine API (got text/html, HTTP 404"}},
		{"plain text 502 from a proxy", 502, "text/plain", "  Bad Gateway from proxy\n", "get", []string{"HTTP 502", `"Bad Gateway from proxy"`}},
		{"JSON of another shape on an error", 404, "application/json", `{"message":"nope"}`, "get", []string{"HTTP 404", `{\"message\":\"nope\"}`}},
		{"JSON of another shape on 200", 200, "application/json", `{"jobs":"many"}`, "list", []string{"HTTP 200", "cannot unmarshal"}},
		{"list answer without its key", 200, "application/json", `{"items":[]}`, "collections", []string{`no "collections" in the list answer`}},
		{"empty error body", 500, "", "", "get", []string{"no Content-Type, HTTP 500"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				if tc.ctype != "" {
					w.Header().Set("Content-Type", tc.ctype)
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			})
			c := newClient(t, []string{f.addr()})
			var err error
			switch tc.call {
			case "get":
				_, err = c.GetJob(context.Background(), "c", "x")
			case "list":
				_, err = c.ListJobs(context.Background(), "c", ListOptions{})
			case "collections":
				_, err = c.ListCollections(context.Background())
			}
			var pe *ProtocolError
			if !errors.Is(err, ErrNotTimemachine) || !errors.As(err, &pe) || pe.HTTPStatus != tc.status {
				t.Fatalf("err = %v (%T), want a *ProtocolError", err, err)
			}
			if ErrorCode(err) != "" || errors.Is(err, ErrNotFound) || errors.Is(err, ErrInternal) {
				t.Errorf("a foreign answer must not look like a contract error: %v", err)
			}
			msg := err.Error()
			for _, s := range append(tc.wantSub, "http://"+f.addr()) {
				if !strings.Contains(msg, s) {
					t.Errorf("message %q lacks %q", msg, s)
				}
			}
			if len(msg) > 600 {
				t.Errorf("message is %d bytes long", len(msg))
			}
			if len(f.requests()) != 1 {
				t.Errorf("sent %d times; a foreign answer is not retried", len(f.requests()))
			}
		})
	}
}

func TestRedirectIsReported(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		http.Redirect(w, r, "https://elsewhere.invalid/v1/cluster", http.StatusMovedPermanently)
	})
	c := newClient(t, []string{f.addr()})
	_, err := c.Cluster(context.Background())
	if !errors.Is(err, ErrNotTimemachine) || !strings.Contains(err.Error(), `redirected to "https://elsewhere.invalid/v1/cluster"`) {
		t.Fatalf("err = %v", err)
	}
	if len(f.requests()) != 1 {
		t.Error("a redirect must not be followed or retried")
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"":                              0,
		"3":                             3 * time.Second,
		"0.5":                           500 * time.Millisecond,
		"-1":                            0,
		"NaN":                           0,
		"junk":                          0,
		"1e12":                          24 * time.Hour,
		"Thu, 01 Jan 2026 00:00:10 GMT": 10 * time.Second,
		"Wed, 31 Dec 2025 23:00:00 GMT": 0,
	} {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestBatchItemErrors(t *testing.T) {
	var r BatchResult
	if err := r.UnmarshalJSON([]byte(`{"id":"a","status":409,"job":{"id":"a","version":2},"error":{"code":"conflict","message":"different spec"}}`)); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(r.Err(), ErrConflict) || r.Error.HTTPStatus != 409 || r.Error.Job == nil || r.Error.Job.Version != 2 || r.Created() {
		t.Errorf("result %+v", r)
	}
	ok := BatchResult{ID: "b", Status: 201}
	if ok.Err() != nil || !ok.Created() {
		t.Errorf("Err of a success = %v", ok.Err())
	}
}
