package slot

import "testing"

// The fire/write rule of one job, step by step: each row is one
// interleaving of a fire (arm, read, startSend) with a DELETE or PUT
// (beginWrite, propose, endWrite).
func TestJobGuard(t *testing.T) {
	type step func(g *jobGuard, tok *fireToken) bool
	arm := func(g *jobGuard, tok *fireToken) bool { *tok = g.arm("c", "j"); return true }
	send := func(g *jobGuard, tok *fireToken) bool { return g.startSend(*tok) }
	begin := func(g *jobGuard, _ *fireToken) bool { return g.beginWrite("c", "j") }
	end := func(g *jobGuard, _ *fireToken) bool { g.endWrite("c", "j"); return true }
	cases := []struct {
		name  string
		steps []step
		want  []bool
	}{
		{"a fire alone sends", []step{arm, send}, []bool{true, true}},
		{"a write alone goes through", []step{begin, end}, []bool{true, true}},
		{"a write after the send starts: 409 firing", []step{arm, send, begin}, []bool{true, true, false}},
		{"a write between read and send cancels the fire", []step{arm, begin, end, send}, []bool{true, true, true, false}},
		{"a write in flight holds the fire", []step{arm, begin, send}, []bool{true, true, false}},
		// armed while a write was in flight: the record it read may
		// predate the write, even once the write has ended
		{"a fire armed during a write never sends", []step{begin, arm, end, send}, []bool{true, true, true, false}},
	}
	for _, c := range cases {
		g := newJobGuard()
		var tok fireToken
		for i, st := range c.steps {
			if got := st(g, &tok); got != c.want[i] {
				t.Errorf("%s: step %d = %v, want %v", c.name, i, got, c.want[i])
			}
		}
	}
	// Entries go away once nothing holds them; firing shows only sends.
	g := newJobGuard()
	tok := g.arm("c", "j")
	if g.firing("c", "j") {
		t.Fatal("an armed fire reads as firing before it sends")
	}
	g.startSend(tok)
	if !g.firing("c", "j") {
		t.Fatal("a sending fire does not read as firing")
	}
	g.disarm(tok, true)
	if g.firing("c", "j") || len(g.jobs) != 0 {
		t.Fatalf("entries left after the fire ended: %v", g.jobs)
	}
}
