package model

// Code is the outcome of applying one command.
type Code uint8

// Outcomes. They are decided by the state machine, identically on every
// replica, and the service turns them into answers.
const (
	CodeOK                 Code = iota // applied
	CodeCreated                        // applied, and a new job/collection/route was created
	CodeExists                         // create of an id that exists with the same spec: nothing changed
	CodeConflict                       // create of an id that exists with another spec
	CodeNotFound                       // the target does not exist
	CodePreconditionFailed             // If-Match did not match the current version
	CodeStale                          // an outcome for a version that has since changed: ignored
	CodeRejected                       // not allowed in the current state (e.g. collection being deleted)
	// CodeFiring: a DELETE or PUT of a job whose callback has started; the
	// slot leader refused it (nothing changed). Job is the job, with
	// status firing. Decided by the leader, never by the state machine.
	CodeFiring
)

func (c Code) String() string {
	switch c {
	case CodeOK:
		return "ok"
	case CodeCreated:
		return "created"
	case CodeExists:
		return "exists"
	case CodeConflict:
		return "conflict"
	case CodeNotFound:
		return "not_found"
	case CodePreconditionFailed:
		return "precondition_failed"
	case CodeStale:
		return "stale"
	case CodeRejected:
		return "rejected"
	case CodeFiring:
		return "firing"
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
	// Schedule is the schedule's state after a schedule command.
	Schedule *Schedule
}
