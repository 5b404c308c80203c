package slot

import (
	"testing"
	"time"
)

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

// A fire abandoned mid-flight (its term ended) still counts as sending
// until its request's deadline: the same replica, leading again, answers a
// write of the job 409 until then, and forgets the job after.
func TestJobGuardAbandonedFireLingers(t *testing.T) {
	g := newJobGuard()
	tok := g.arm("c", "j")
	if !g.startSend(tok) {
		t.Fatal("the fire could not send")
	}
	g.disarmAfter(tok, time.Now().Add(200*time.Millisecond))
	if !g.firing("c", "j") || g.beginWrite("c", "j") {
		t.Fatal("a write went through while the abandoned attempt may still be with the receiver")
	}
	deadline := time.Now().Add(5 * time.Second)
	for g.firing("c", "j") {
		if time.Now().After(deadline) {
			t.Fatal("the abandoned attempt never ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !g.beginWrite("c", "j") {
		t.Fatal("a write was refused after the abandoned attempt's deadline")
	}
	g.endWrite("c", "j")
	if len(g.jobs) != 0 {
		t.Fatalf("entries left: %v", g.jobs)
	}
}
