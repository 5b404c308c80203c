package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/timemachine-db/timemachine/model"
)

// This file is the only place that turns domain errors into HTTP: below
// this package errors are *model.Error values with a Kind, and the status
// code a client sees is chosen here.

// statusOf is the HTTP status of each error kind (docs/api.md#errors); 0
// for a kind the contract does not know.
func statusOf(k model.Kind) int {
	switch k {
	case model.KindInvalidArgument:
		return http.StatusBadRequest
	case model.KindUnauthenticated:
		return http.StatusUnauthorized
	case model.KindPermissionDenied:
		return http.StatusForbidden
	case model.KindNotFound:
		return http.StatusNotFound
	case model.KindConflict:
		return http.StatusConflict
	case model.KindPreconditionFailed:
		return http.StatusPreconditionFailed
	case model.KindTooLarge:
		return http.StatusRequestEntityTooLarge
	case model.KindOverloaded:
		return http.StatusTooManyRequests
	case model.KindUnavailable:
		return http.StatusServiceUnavailable
	case model.KindInternal:
		return http.StatusInternalServerError
	}
	return 0
}

// StatusOf is the HTTP status a domain error kind is answered with (0 for
// an unknown kind, which is answered as 500 internal). Exported for tests
// of other packages that check a backend's errors by their status.
func StatusOf(k model.Kind) int { return statusOf(k) }

// asError converts any error into a domain error the API can answer with:
// a *model.Error (also wrapped) stands for itself; a timeout is unavailable
// (the client may retry); anything else, or an unknown kind, is internal.
func asError(err error) *model.Error {
	if e, ok := model.AsError(err); ok {
		if statusOf(e.Kind) == 0 {
			return model.Internal("%s", e.Message)
		}
		return e
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return model.Unavailable(time.Second, "the cluster did not answer in time; retry the request")
	}
	// A bug. Its text may name files or internals: it goes to the log
	// (fail logs every 5xx), not to the client.
	return model.Internal("an unexpected error occurred on this node (it is in the node's log); please report it")
}
