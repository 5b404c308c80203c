package history

import (
	"math"
	"time"
)

// Stamp is one reading of the checker's clock: Mono is nanoseconds since
// the start of the run (monotonic), Wall is the Unix time in nanoseconds
// derived from it (start wall time + Mono).
type Stamp struct {
	Mono int64 `json:"mono"`
	Wall int64 `json:"wall"`
}

// Never is the Mono of a completion that never happened (an indeterminate
// operation): later than every real stamp, as porcupine wants the return
// time of an operation that may take effect at any point after its call.
var Never = Stamp{Mono: math.MaxInt64, Wall: math.MaxInt64}

// WallMs is the stamp's wall time in Unix milliseconds, rounded down.
func (s Stamp) WallMs() int64 { return s.Wall / int64(time.Millisecond) }

// Time is the stamp's wall time.
func (s Stamp) Time() time.Time { return time.Unix(0, s.Wall) }

// Clock is the checker's clock for one run.
type Clock struct {
	start time.Time // carries a monotonic reading
}

// NewClock starts a clock now.
func NewClock() *Clock { return &Clock{start: time.Now()} }

// ClockAt restarts a clock whose zero is the wall time startWall (Unix ns);
// used when a run is loaded back, to convert wall times.
func ClockAt(startWall int64) *Clock { return &Clock{start: time.Unix(0, startWall)} }

// Now reads the clock.
func (c *Clock) Now() Stamp { return c.At(time.Now()) }

// At converts t (which should carry a monotonic reading, like any
// time.Now()) to a stamp.
func (c *Clock) At(t time.Time) Stamp {
	m := int64(t.Sub(c.start))
	return Stamp{Mono: m, Wall: c.start.UnixNano() + m}
}

// StartWall is the run's start as Unix nanoseconds.
func (c *Clock) StartWall() int64 { return c.start.UnixNano() }

// Kind is the kind of a client operation.
type Kind string

// The operations of the job CRUD workload.
const (
	Create Kind = "create" // POST /v1/collections/{c}/jobs (one object)
	Get    Kind = "get"    // GET  /v1/collections/{c}/jobs/{id}
	Put    Kind = "put"    // PUT  /v1/collections/{c}/jobs/{id}, If-Match when IfMatch != 0
	Delete Kind = "delete" // DELETE /v1/collections/{c}/jobs/{id}
)

// Outcome says what is known of an operation's effect.
type Outcome string

const (
	// OK: a definite answer from the server (any status the contract gives
	// a meaning to: 2xx, 404, 409, 412, ...). The model must explain it.
	OK Outcome = "ok"
	// Fail: certainly not applied (the connection was refused before any
	// byte was sent, or 429: "a request that gets an error changed
	// nothing" and the server did not even start it).
	Fail Outcome = "fail"
	// Unknown: indeterminate: a timeout, a transport error after the request
	// was sent, or a 5xx. It may or may not have taken effect.
	Unknown Outcome = "unknown"
)

// Op is one client operation: the invocation and, once it returned, its
// completion.
type Op struct {
	ID     int64  `json:"id"`
	Client int    `json:"client"`
	Kind   Kind   `json:"kind"`
	Coll   string `json:"coll"`
	JobID  string `json:"job"`
	Via    string `json:"via"` // the node the request was sent to
	// Trigger is the trigger_time sent by a create or put (Unix ms).
	Trigger int64 `json:"trigger,omitempty"`
	// Spec labels the job spec sent by a create or put: two writes with the
	// same label sent the same spec.
	Spec string `json:"spec,omitempty"`
	// IfMatch is the If-Match version of a put (0: none).
	IfMatch uint64 `json:"if_match,omitempty"`
	Call    Stamp  `json:"call"`

	// The completion. Ret is Never while (or when) there is none.
	Ret     Stamp   `json:"ret"`
	Outcome Outcome `json:"outcome"`
	Status  int     `json:"status,omitempty"` // HTTP status (0: no answer)
	Code    string  `json:"code,omitempty"`   // the error body's code
	Err     string  `json:"err,omitempty"`    // transport error or error message
	// The job in the answer, when there was one.
	Version    uint64 `json:"version,omitempty"`
	JobStatus  string `json:"job_status,omitempty"`
	JobTrigger int64  `json:"job_trigger,omitempty"`
	// For diagnosis: the job's attempts and last_error in the answer.
	JobAttempts  int    `json:"job_attempts,omitempty"`
	JobLastError string `json:"job_last_error,omitempty"`
}

// Key is the job's collection/id: the unit of partitioning.
func (o *Op) Key() string { return o.Coll + "/" + o.JobID }

// Write reports whether the operation may change state.
func (o *Op) Write() bool { return o.Kind != Get }

// Completion is what a finished operation learnt.
type Completion struct {
	Ret        Stamp   `json:"ret"`
	Outcome    Outcome `json:"outcome"`
	Status     int     `json:"status,omitempty"`
	Code       string  `json:"code,omitempty"`
	Err        string  `json:"err,omitempty"`
	Version    uint64  `json:"version,omitempty"`
	JobStatus  string  `json:"job_status,omitempty"`
	JobTrigger int64   `json:"job_trigger,omitempty"`
	// For diagnosis only.
	JobAttempts  int    `json:"job_attempts,omitempty"`
	JobLastError string `json:"job_last_error,omitempty"`
}

// Delivery is one callback request the receiver got.
type Delivery struct {
	Seq   int64  `json:"seq"`
	Coll  string `json:"coll"`
	JobID string `json:"job"`
	// From the headers and the body.
	IdemKey       string `json:"idem_key"`
	AttemptHeader int    `json:"attempt_header"`
	Attempt       int    `json:"attempt"` // the body's attempt
	Trigger       int64  `json:"trigger"` // the body's trigger_time (Unix ms)
	// From is the node that sent it, when the source address identifies
	// one; FromAddr is that address.
	From     string `json:"from,omitempty"`
	FromAddr string `json:"from_addr,omitempty"`
	// Recv is when the request's body had been read; Reply when the
	// receiver answered (or closed the connection).
	Recv  Stamp `json:"recv"`
	Reply Stamp `json:"reply"`
	// Answer is what the receiver did: "200", "500", "slow-200" (answered
	// 200 after a delay), "close" (closed without answering), "gone" (the
	// sender hung up before the answer).
	Answer string `json:"answer"`
	// Bad describes a request that did not decode as a callback.
	Bad string `json:"bad,omitempty"`
	// Route is set for the capped route's deliveries (its jobs are not
	// the workload's: the in-flight checker reads them, the fire checker
	// does not).
	Route string `json:"route,omitempty"`
}

// Key is the delivered job's collection/id.
func (d *Delivery) Key() string { return d.Coll + "/" + d.JobID }

// Fault is one fault window.
type Fault struct {
	ID    int    `json:"id"`
	Cycle int    `json:"cycle"`
	Kind  string `json:"kind"`
	// Planned faults are the operator's moves (drain, rebalance, add and
	// remove nodes, SIGTERM): the contract promises they deliver no
	// callback twice.
	Planned bool     `json:"planned"`
	Targets []string `json:"targets,omitempty"`
	// Isolates: the targets were cut off from the others (killed, paused,
	// partitioned into a minority); whatever they send after the fault
	// ended must reflect what the others did meanwhile.
	Isolates bool   `json:"isolates,omitempty"`
	Detail   string `json:"detail,omitempty"`
	Start    Stamp  `json:"start"`
	End      Stamp  `json:"end"` // Never while it lasts
}

// SlotProbe is how long after the fault a create in one slot was first
// acknowledged (After < 0: never within the probe's timeout).
type SlotProbe struct {
	Slot  int   `json:"slot"`
	After int64 `json:"after_ns"`
}

// Failover is one measurement: a node that led slots was killed or
// paused at At; how long until every slot it led was writable again.
type Failover struct {
	Cycle  int         `json:"cycle"`
	Fault  string      `json:"fault"`
	Victim string      `json:"victim"`
	At     Stamp       `json:"at"`
	Probes []SlotProbe `json:"probes"`
	// All is the time until every probe succeeded (< 0: some never did).
	All int64 `json:"all_ns"`
	// TargetNs is the bound this measurement is held to (0: the checker's
	// default).
	TargetNs int64 `json:"target_ns,omitempty"`
	// HealedNs is when the fault was healed, after At (0: unknown). A slot
	// that became writable only after that says nothing about failover
	// within a target longer than the fault.
	HealedNs int64 `json:"healed_ns,omitempty"`
}

// Cycle is what one cycle of the schedule did.
type Cycle struct {
	N      int    `json:"n"`
	Fault  string `json:"fault"`
	Detail string `json:"detail"`
	Start  Stamp  `json:"start"`
	End    Stamp  `json:"end"`
	// Recovered: the cluster was healthy again (every node ready, every
	// slot led with its replicas) RecoveryNs after the fault was healed.
	Recovered  bool   `json:"recovered"`
	RecoveryNs int64  `json:"recovery_ns"`
	Problem    string `json:"problem,omitempty"`
	// Violations the runner saw directly (e.g. a removed node still
	// listed by /v1/cluster).
	Violations []string `json:"violations,omitempty"`
}

// Meta describes the run.
type Meta struct {
	Seed      uint64   `json:"seed"`
	Nodes     int      `json:"nodes"`
	Cycles    int      `json:"cycles"`
	Faults    []string `json:"faults"`
	Mode      string   `json:"mode"` // "netns" or "loopback"
	StartWall int64    `json:"start_wall"`
	Binary    string   `json:"binary"`
	Version   string   `json:"version"`
	// CallbackTimeoutMs is the workload jobs' callback_timeout; the fire
	// checker's in-flight window starts that long before a fault.
	CallbackTimeoutMs int64 `json:"callback_timeout_ms"`
	// Unsupported lists the fault kinds that were asked for but could not
	// run, with the reason.
	Unsupported map[string]string `json:"unsupported,omitempty"`
	// NodeAddrs maps node id → the address its callbacks come from.
	NodeAddrs map[string]string `json:"node_addrs,omitempty"`
	Command   string            `json:"command"`
	// FailoverAllowanceMs extends a fault's in-flight window past its end
	// for the duplicate classification.
	FailoverAllowanceMs int64 `json:"failover_allowance_ms"`
	// FailoverTargetMs is the default failover bound.
	FailoverTargetMs int64 `json:"failover_target_ms"`
	// DrainedUntil (Unix ns): the run waited for deliveries until then;
	// jobs due later owe none (0: the run did not finish).
	DrainedUntil int64 `json:"drained_until,omitempty"`
	// RouteMaxInFlight is the capped route's max_in_flight (0: the run
	// had none); RouteGraceMs how long after a fault an excess is allowed.
	RouteMaxInFlight int   `json:"route_max_in_flight,omitempty"`
	RouteGraceMs     int64 `json:"route_grace_ms,omitempty"`
}

// History is a whole run, loaded back.
type History struct {
	Meta       Meta
	Ops        []Op // in invocation order
	Deliveries []Delivery
	Faults     []Fault
	Failovers  []Failover
	Cycles     []Cycle
}
