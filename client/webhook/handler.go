package webhook

import (
	"context"
	"errors"
	"net/http"
)

// Handler is an http.Handler for timemachine callbacks: it enforces the
// body limit, verifies the signature, parses the body into Callbacks, calls
// the user's function and turns its Response into the answer timemachine
// understands.
//
//	v, _ := webhook.NewVerifier(os.Getenv("TIMEMACHINE_SIGNING_SECRET"))
//	http.Handle("/hook", webhook.NewHandler(v, func(ctx context.Context, cb *webhook.Callback) webhook.Response {
//		if err := remind(ctx, cb.Meta); err != nil {
//			return webhook.Retry(30 * time.Second)
//		}
//		return webhook.OK()
//	}))
//
// Requests it refuses before calling the user: 405 for a method other than
// POST, 413 for a body over MaxBodyBytes, 401 for a signature that does not
// verify, 400 for a body that is not a callback. timemachine treats these
// 4xx answers as final (the job fails and can be redriven), which is right
// for a forgery and makes a misconfigured secret visible at once in the
// job's last_error.
type Handler struct {
	// Verifier checks the signature. It is required unless
	// InsecureSkipVerify is set; a Handler with neither answers 500 to
	// every request (so timemachine retries and nothing is lost while the
	// receiver is fixed).
	Verifier *Verifier
	// InsecureSkipVerify accepts unsigned callbacks: only for collections
	// without a signing secret, on a network nobody else can reach.
	InsecureSkipVerify bool
	// MaxBodyBytes bounds the body; DefaultMaxBodyBytes when ≤ 0.
	MaxBodyBytes int64
	// Callback handles one job: a single callback, or each job of a batched
	// delivery in turn when Batch is nil. Required.
	Callback func(ctx context.Context, cb *Callback) Response
	// Batch, if set, handles a batched delivery at once (for example in one
	// database transaction) and returns one Response per callback, in
	// order. See WriteBatch for how the answers are sent.
	Batch func(ctx context.Context, cbs []Callback) []Response
}

// NewHandler returns a Handler that verifies with v and calls fn per job.
func NewHandler(v *Verifier, fn func(ctx context.Context, cb *Callback) Response) *Handler {
	return &Handler{Verifier: v, Callback: fn}
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "timemachine callbacks are POST requests", http.StatusMethodNotAllowed)
		return
	}
	if h.Callback == nil || (h.Verifier == nil && !h.InsecureSkipVerify) {
		http.Error(w, "webhook.Handler is misconfigured: it needs a Callback and a Verifier (or InsecureSkipVerify)", http.StatusInternalServerError)
		return
	}
	v := h.Verifier
	if h.InsecureSkipVerify {
		v = nil
	}
	d, err := Read(r, v, h.MaxBodyBytes)
	switch {
	case err == nil:
	case errors.Is(err, ErrBodyTooLarge):
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	case errors.Is(err, ErrVerification):
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	case errors.Is(err, ErrMalformed):
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	default: // the connection broke while reading: let the sender retry
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	ctx := r.Context()
	if !d.Batch {
		h.Callback(ctx, &d.Callbacks[0]).Write(w)
		return
	}
	var rs []Response
	if h.Batch != nil {
		rs = h.Batch(ctx, d.Callbacks)
	} else {
		rs = make([]Response, len(d.Callbacks))
		for i := range d.Callbacks {
			rs[i] = h.Callback(ctx, &d.Callbacks[i])
		}
	}
	WriteBatch(w, d.Callbacks, rs)
}
