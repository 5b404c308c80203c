package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/model"
)

// A stale plan is made again; another error, or a success, ends the
// retries at once; a plan still stale after the last attempt, or when
// the request ends, is a 409 conflict the operator can retry.
func TestRetryStale(t *testing.T) {
	boom := errors.New("boom")
	for _, c := range []struct {
		name     string
		results  []error // what each attempt returns; past the end: success
		ctx      func() context.Context
		calls    int
		wantKind model.Kind // "": no model error
		wantErr  error
	}{
		{"success at once", nil, context.Background, 1, "", nil},
		{"stale twice, then planned", []error{errPlanStale, errPlanStale}, context.Background, 3, "", nil},
		{"another error is not retried", []error{boom}, context.Background, 1, "", boom},
		{"stale every time", []error{errPlanStale, errPlanStale, errPlanStale, errPlanStale}, context.Background, 3, model.KindConflict, nil},
		{"stale and the request ends", []error{errPlanStale, errPlanStale}, func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, 1, model.KindConflict, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := 0
			v, err := retryStale(c.ctx(), 3, time.Millisecond, func() (int, error) {
				calls++
				if calls <= len(c.results) && c.results[calls-1] != nil {
					return 0, c.results[calls-1]
				}
				return 7, nil
			})
			if calls != c.calls {
				t.Errorf("%d attempts, want %d", calls, c.calls)
			}
			switch {
			case c.wantKind != "":
				var me *model.Error
				if !errors.As(err, &me) || me.Kind != c.wantKind {
					t.Fatalf("err %v, want kind %v", err, c.wantKind)
				}
			case c.wantErr != nil:
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err %v, want %v", err, c.wantErr)
				}
			default:
				if err != nil || v != 7 {
					t.Fatalf("%d, %v; want 7, nil", v, err)
				}
			}
		})
	}
}
