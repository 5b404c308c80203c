package check

import (
	"testing"

	"github.com/timemachine-db/timemachine/internal/nemesis/history"
)

// TestInFlight: arrivals that find the cap reached are violations outside
// every fault's window and allowed inside it (until RouteGraceMs after
// its end); an answer and the next arrival at the same instant do not
// overlap; deliveries without a route are not counted.
func TestInFlight(t *testing.T) {
	ms := func(n int64) history.Stamp { return history.Stamp{Mono: n * 1e6} }
	d := func(seq, from, to int64) history.Delivery {
		return history.Delivery{Seq: seq, JobID: "j", Route: "capped", Recv: ms(from), Reply: ms(to)}
	}
	for _, tc := range []struct {
		name              string
		dels              []history.Delivery
		inWindow, outside int
		maxOpen           int
	}{
		{"one at a time", []history.Delivery{d(1, 0, 30), d(2, 30, 60), d(3, 100, 130)}, 0, 0, 1},
		{"overlap outside faults", []history.Delivery{d(1, 0, 30), d(2, 20, 50)}, 0, 1, 2},
		{"overlap during a fault", []history.Delivery{d(1, 1000, 1030), d(2, 1010, 1040)}, 1, 0, 2},
		{"overlap within the grace after it", []history.Delivery{d(1, 2900, 2950), d(2, 2910, 2960)}, 1, 0, 2},
		{"overlap after the grace", []history.Delivery{d(1, 3100, 3150), d(2, 3110, 3160)}, 0, 1, 2},
		{"not the route's", []history.Delivery{d(1, 0, 30), {Seq: 2, Recv: ms(10), Reply: ms(20)}}, 0, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &history.History{
				Meta:       history.Meta{RouteMaxInFlight: 1, RouteGraceMs: 1000},
				Deliveries: tc.dels,
				Faults:     []history.Fault{{ID: 1, Kind: "pause", Start: ms(900), End: ms(2000)}},
			}
			res := InFlight(h)
			if len(res.InWindow) != tc.inWindow || len(res.Outside) != tc.outside || res.MaxOpen != tc.maxOpen {
				t.Fatalf("in window %v, outside %v, max open %d; want %d, %d, %d", res.InWindow, res.Outside, res.MaxOpen, tc.inWindow, tc.outside, tc.maxOpen)
			}
		})
	}
	if res := InFlight(&history.History{Deliveries: []history.Delivery{d(1, 0, 30), d(2, 10, 40)}}); res.Cap != 0 || len(res.Outside) != 0 {
		t.Fatalf("a run without a capped route: %+v", res)
	}
}
