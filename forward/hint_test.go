package forward

import "testing"

// A not_leader answer must never name the node that gives it, and a
// caller must never keep a hint that names the node that just said it
// does not lead, or itself: a node whose cached hint named itself told
// every caller "ask me", and reads of its slot answered 503 after 5 s,
// indefinitely (issue 10). The first rows are that case.
func TestHints(t *testing.T) {
	for _, c := range []struct{ local, cached, self, want string }{
		{"", "n1", "n1", ""},     // the stale self-hint of the issue
		{"n1", "n1", "n1", ""},   // raft still names this node while it steps down
		{"n2", "n1", "n1", "n2"}, // the leader the replica follows wins
		{"", "n3", "n1", "n3"},
		{"n2", "n3", "n1", "n2"},
		{"", "", "n1", ""},
	} {
		if got := replyHint(c.local, c.cached, c.self); got != c.want {
			t.Errorf("replyHint(local %q, cached %q, self %q) = %q, want %q", c.local, c.cached, c.self, got, c.want)
		}
	}
	for _, c := range []struct{ hint, target, self, want string }{
		{"n2", "n2", "n1", ""}, // the replier names itself: stale
		{"n1", "n2", "n1", ""}, // names the caller, which does not lead either
		{"n3", "n2", "n1", "n3"},
		{"", "n2", "n1", ""},
	} {
		if got := followHint(c.hint, c.target, c.self); got != c.want {
			t.Errorf("followHint(%q from %q at %q) = %q, want %q", c.hint, c.target, c.self, got, c.want)
		}
	}
}
