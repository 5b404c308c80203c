package raftfsm

// Code is the outcome of applying one command.
type Code uint8

// Outcomes. They are decided by the state machine, identically on every
// replica, and the leader turns them into API answers.
const (
	OK                 Code = iota // applied
	Created                        // applied, and a new job/collection/route was created
	Exists                         // create of an id that exists with the same spec: nothing changed
	Conflict                       // create of an id that exists with another spec
	NotFound                       // the target does not exist
	PreconditionFailed             // If-Match did not match the current version
	Stale                          // an outcome for a version that has since changed: ignored
	Rejected                       // not allowed in the current state (e.g. collection being deleted)
)

func (c Code) String() string {
	switch c {
	case OK:
		return "ok"
	case Created:
		return "created"
	case Exists:
		return "exists"
	case Conflict:
		return "conflict"
	case NotFound:
		return "not_found"
	case PreconditionFailed:
		return "precondition_failed"
	case Stale:
		return "stale"
	case Rejected:
		return "rejected"
	}
	return "unknown"
}

// Result is the outcome of one command. Job is the job's state after the
// command for job commands that touch one job (nil otherwise).
type Result struct {
	Code Code
	Job  *Job
	// More is set by the bounded range commands (RemoveFinished,
	// PurgeCollection) when they stopped at their limit.
	More bool
	// N counts what a range command removed.
	N int64
}
