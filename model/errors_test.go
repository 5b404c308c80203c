package model

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		e    *Error
		kind Kind
	}{
		{Invalid("x %d", 1), KindInvalidArgument},
		{NotFound("x"), KindNotFound},
		{Conflict("x"), KindConflict},
		{PreconditionFailed("x"), KindPreconditionFailed},
		{TooLarge("x"), KindTooLarge},
		{Overloaded(time.Second, "x"), KindOverloaded},
		{Unavailable(time.Second, "x"), KindUnavailable},
		{Internal("x"), KindInternal},
	} {
		if tc.e.Kind != tc.kind || !tc.kind.Known() {
			t.Errorf("%v: kind %s, want %s", tc.e, tc.e.Kind, tc.kind)
		}
		wrapped := fmt.Errorf("context: %w", tc.e)
		if got, ok := AsError(wrapped); !ok || got != tc.e || !IsKind(wrapped, tc.kind) {
			t.Errorf("%v: not found through a wrap", tc.e)
		}
	}
	if e := Unavailable(3*time.Second, "no leader"); e.RetryAfter != 3*time.Second || e.Error() != "unavailable: no leader" {
		t.Errorf("%+v", e)
	}
	if _, ok := AsError(errors.New("plain")); ok || IsKind(nil, KindInternal) {
		t.Error("a plain error is not a domain error")
	}
	if Kind("teapot").Known() {
		t.Error("an unknown kind is known")
	}
}
