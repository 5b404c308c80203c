package forward

import (
	"errors"
	"fmt"
	"testing"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/rpc/peer"
)

// What a handler's error becomes on the wire, and back on the caller: the
// same sentinel or the same domain kind — never an HTTP status.
func TestWireErrorsRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code string
	}{
		{raftgroup.ErrNotLeader, CodeNotLeader},
		{fmt.Errorf("slot 2: %w", raftgroup.ErrUnknownOutcome), CodeUnknownOutcome},
		{raftgroup.ErrClosed, CodeClosed},
		{raftgroup.ErrOverloaded, CodeOverloaded},
		{raftfsm.ErrStopped, CodeStopped},
		{model.NotFound("no such job"), "not_found"},
		{model.Invalid("bad"), "invalid_argument"},
		{model.PreconditionFailed("version"), "precondition_failed"},
		{model.Unavailable(0, "later"), "unavailable"},
	} {
		wire := ToWire(tc.err, "n2")
		var re *peer.RemoteError
		if !errors.As(wire, &re) || re.Code != tc.code {
			t.Errorf("%v on the wire: %v, want code %q", tc.err, wire, tc.code)
			continue
		}
		back := FromWire(wire)
		if me, ok := model.AsError(tc.err); ok {
			got, ok := model.AsError(back)
			if !ok || got.Kind != me.Kind || got.Message != me.Message {
				t.Errorf("%v came back as %v", tc.err, back)
			}
			continue
		}
		if !errors.Is(back, errors.Unwrap(tc.err)) && !errors.Is(back, tc.err) {
			t.Errorf("%v came back as %v", tc.err, back)
		}
	}
	if ToWire(nil, "") != nil {
		t.Error("nil became an error")
	}
	if re := ToWire(raftgroup.ErrNotLeader, "n7").(*peer.RemoteError); re.Message != "n7" {
		t.Errorf("not_leader carries the hint: %+v", re)
	}
	if !errors.Is(FromWire(NoReplica("n3")), raftgroup.ErrNotLeader) {
		t.Error("no_replica is a not-leader answer to the caller")
	}
	plain := errors.New("disk on fire")
	if got := FromWire(ToWire(plain, "")); got == nil || errors.Is(got, raftgroup.ErrNotLeader) {
		t.Errorf("an unknown error came back as %v", got)
	}
	unreachable := fmt.Errorf("%w: dial", peer.ErrUnreachable)
	if FromWire(unreachable) != unreachable {
		t.Error("a transport error must come back untouched")
	}
}

func TestSlotBody(t *testing.T) {
	for _, s := range []int{0, 1, 11, 4095} {
		b := SlotBody(s, []byte("rest"))
		got, rest, err := SplitSlotBody(b)
		if err != nil || got != s || string(rest) != "rest" {
			t.Errorf("slot %d: %d %q %v", s, got, rest, err)
		}
	}
	if _, _, err := SplitSlotBody([]byte{1}); err == nil {
		t.Error("a short body was accepted")
	}
}
