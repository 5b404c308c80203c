package raftfsm

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/timemachine-db/timemachine/model"
)

// CmdType is the first byte of every encoded command.
type CmdType uint8

// Command types. Numbers are part of the on-disk format: never reuse one.
const (
	CmdBatch           CmdType = 1
	CmdCreate          CmdType = 2
	CmdUpsert          CmdType = 3
	CmdDelete          CmdType = 4
	CmdAck             CmdType = 5
	CmdRetry           CmdType = 6
	CmdReschedule      CmdType = 7
	CmdAdvanceOffset   CmdType = 8
	CmdDropDue         CmdType = 9
	CmdRemoveFinished  CmdType = 10
	CmdPurgeCollection CmdType = 11
	// CmdDeleteIncarnation deletes a job only if it is the incarnation
	// the caller read (its created_at): how a DELETE whose outcome is
	// unknown is re-sent (service/resolve.go).
	CmdDeleteIncarnation CmdType = 16
	// CmdDropTombstones removes the tombstones of deleted jobs created
	// before a time (storage.TombKey).
	CmdDropTombstones CmdType = 17

	CmdPutCollection    CmdType = 32
	CmdMarkCollDeleting CmdType = 33
	CmdForgetCollection CmdType = 34
	CmdPutRoute         CmdType = 35
	CmdDeleteRoute      CmdType = 36
	CmdInitCluster      CmdType = 37
	CmdUpsertNode       CmdType = 38
	CmdSetSlots         CmdType = 39
	CmdRemoveNode       CmdType = 40
	CmdSetRF            CmdType = 41
	CmdSetPreferred     CmdType = 42
	CmdForgetNode       CmdType = 43
	// CmdPutRouteV2 is PutRoute for a route with delivery control: the
	// CmdPutRoute body plus the delivery fields (appendRouteDelivery).
	// A route without any is still written as CmdPutRoute, so its bytes
	// stay readable by binaries that predate delivery control.
	CmdPutRouteV2 CmdType = 44
	// CmdPutRouteV3 is PutRoute for a pipelined route: the CmdPutRouteV2
	// body with a flags uvarint (routePipelineFlag) before Now. A binary
	// that predates it stops at the entry with "install the newer
	// binary" (ErrNewerCommand) instead of skipping a route change.
	CmdPutRouteV3 CmdType = 45
)

// routePipelineFlag is CmdPutRouteV3's flag bit for model.Route.Pipeline.
const routePipelineFlag = 1

const v1 = 1

// Command is one state-machine operation. Several travel in one raft entry
// (a batch), which is how throughput is won: one fsync, one apply batch.
type Command interface {
	Type() CmdType
	appendBody(dst []byte) []byte
}

// Encode encodes commands as one raft entry: a single command as itself,
// several as a batch.
func Encode(cmds ...Command) []byte {
	if len(cmds) == 1 {
		return appendCommand(nil, cmds[0])
	}
	dst := []byte{byte(CmdBatch), v1}
	dst = binary.AppendUvarint(dst, uint64(len(cmds)))
	var tmp []byte
	for _, c := range cmds {
		tmp = appendCommand(tmp[:0], c)
		dst = putBytes(dst, tmp)
	}
	return dst
}

func appendCommand(dst []byte, c Command) []byte {
	dst = append(dst, byte(c.Type()), v1)
	return c.appendBody(dst)
}

// Decode decodes a raft entry into its commands. It never panics and never
// allocates more than a small multiple of len(b), whatever b holds.
func Decode(b []byte) ([]Command, error) {
	if len(b) >= 2 && CmdType(b[0]) == CmdBatch {
		if b[1] != v1 {
			return nil, fmt.Errorf("%w: %w: batch version %d", ErrCorrupt, ErrNewerCommand, b[1])
		}
		r := reader{b: b[2:]}
		n := r.uvarint()
		if r.err == nil && (n > maxEntries || n > uint64(len(r.b))) {
			r.fail("batch count")
		}
		if r.err != nil {
			return nil, r.err
		}
		out := make([]Command, 0, n)
		for i := uint64(0); i < n; i++ {
			sub := r.bytes(len(r.b))
			if r.err != nil {
				return nil, r.err
			}
			c, err := decodeOne(sub)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		if err := r.done(); err != nil {
			return nil, err
		}
		return out, nil
	}
	c, err := decodeOne(b)
	if err != nil {
		return nil, err
	}
	return []Command{c}, nil
}

func decodeOne(b []byte) (Command, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: short command", ErrCorrupt)
	}
	t, ver := CmdType(b[0]), b[1]
	if ver != v1 {
		return nil, fmt.Errorf("%w: %w: command %d version %d", ErrCorrupt, ErrNewerCommand, t, ver)
	}
	r := reader{b: b[2:]}
	var c Command
	switch t {
	case CmdCreate:
		x := &Create{}
		x.Coll, x.ID, x.Spec, x.Now = r.str(maxStr), r.str(maxStr), r.spec(), r.varint()
		if r.err == nil && len(r.b) > 0 {
			x.CollInc = r.uvarint()
		}
		c = x
	case CmdUpsert:
		x := &Upsert{}
		x.Coll, x.ID, x.Spec, x.IfMatch, x.Now = r.str(maxStr), r.str(maxStr), r.spec(), r.uvarint(), r.varint()
		if r.err == nil && len(r.b) > 0 {
			x.CollInc = r.uvarint()
		}
		c = x
	case CmdDelete:
		c = &Delete{Coll: r.str(maxStr), ID: r.str(maxStr)}
	case CmdDropTombstones:
		c = &DropTombstones{Before: r.varint()}
	case CmdDeleteIncarnation:
		x := &DeleteIncarnation{Coll: r.str(maxStr), ID: r.str(maxStr)}
		x.CreatedAt = r.varint()
		c = x
	case CmdAck:
		x := &Ack{}
		x.Coll, x.ID, x.Version = r.str(maxStr), r.str(maxStr), r.uvarint()
		x.Success = r.byte() == 1
		x.Attempts, x.LastError, x.Now = r.varint(), r.str(maxStr), r.varint()
		c = x
	case CmdRetry:
		x := &Retry{}
		x.Coll, x.ID, x.Version = r.str(maxStr), r.str(maxStr), r.uvarint()
		x.NextDue, x.Attempts, x.LastError, x.Now = r.varint(), r.varint(), r.str(maxStr), r.varint()
		c = x
	case CmdReschedule:
		x := &Reschedule{}
		x.Coll, x.ID, x.Version = r.str(maxStr), r.str(maxStr), r.uvarint()
		x.TriggerTime, x.Now = r.varint(), r.varint()
		c = x
	case CmdAckMany:
		c = r.ackMany()
	case CmdAdvanceOffset:
		c = &AdvanceOffset{Offset: r.varint()}
	case CmdDropDue:
		x := &DropDue{}
		x.Due, x.Coll, x.ID = r.varint(), r.str(maxStr), r.str(maxStr)
		c = x
	case CmdRemoveFinished:
		x := &RemoveFinished{}
		x.Coll, x.Before, x.Limit = r.str(maxStr), r.varint(), r.varint()
		c = x
	case CmdPurgeCollection:
		x := &PurgeCollection{}
		x.Coll, x.Limit = r.str(maxStr), r.varint()
		if r.err == nil && len(r.b) > 0 {
			x.Fence = r.uvarint()
		}
		c = x
	case CmdPutCollection:
		x := &PutCollection{}
		x.C = r.collection()
		x.Now = r.varint()
		c = x
	case CmdMarkCollDeleting:
		c = &MarkCollectionDeleting{Name: r.str(maxStr), Now: r.varint()}
	case CmdForgetCollection:
		c = &ForgetCollection{Name: r.str(maxStr)}
	case CmdPutRoute:
		x := &PutRoute{}
		x.R = r.route()
		x.Now = r.varint()
		c = x
	case CmdPutRouteV2:
		x := &PutRoute{}
		x.R = r.route()
		r.routeDelivery(&x.R)
		x.Now = r.varint()
		c = x
	case CmdPutRouteV3:
		x := &PutRoute{}
		x.R = r.route()
		r.routeDelivery(&x.R)
		if flags := r.uvarint(); flags != routePipelineFlag {
			r.fail("route flags")
		}
		x.R.Pipeline = true
		x.Now = r.varint()
		c = x
	case CmdDeleteRoute:
		c = &DeleteRoute{Name: r.str(maxStr)}
	case CmdInitCluster:
		c = r.initCluster()
	case CmdUpsertNode:
		x := &UpsertNode{N: r.node()}
		x.Now = r.varint()
		c = x
	case CmdSetSlots:
		c = r.setSlots()
	case CmdRemoveNode:
		c = &RemoveNode{ID: r.str(maxStr)}
	case CmdSetRF:
		c = &SetReplicationFactor{RF: int(r.varint())}
	case CmdSetPreferred:
		c = r.setPreferred()
	case CmdForgetNode:
		x := &ForgetNode{ID: r.str(maxStr)}
		x.At, x.StartedAt = r.varint(), r.varint()
		c = x
	default:
		x, ok := decodeSchedule(t, &r)
		if !ok {
			return nil, fmt.Errorf("%w: %w: command type %d", ErrCorrupt, ErrNewerCommand, t)
		}
		c = x
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return c, nil
}

func appendSpec(dst []byte, s *model.JobSpec) []byte {
	dst = binary.AppendVarint(dst, s.TriggerTime)
	dst = putStr(dst, s.CallbackURL)
	dst = putStr(dst, s.Route)
	if s.Meta == nil {
		dst = append(dst, 0)
	} else {
		dst = append(dst, 1)
		dst = putBytes(dst, s.Meta)
	}
	dst = appendRetry(dst, s.Retry)
	dst = binary.AppendVarint(dst, s.CallbackTimeoutMs)
	return binary.LittleEndian.AppendUint64(dst, s.Hash)
}

func (r *reader) spec() model.JobSpec {
	var s model.JobSpec
	s.TriggerTime = r.varint()
	s.CallbackURL = r.str(maxStr)
	s.Route = r.str(maxStr)
	if r.byte() == 1 {
		s.Meta = append([]byte{}, r.bytes(maxMeta)...)
	}
	s.Retry = r.retryPolicy()
	s.CallbackTimeoutMs = r.varint()
	if r.err == nil && len(r.b) >= 8 {
		s.Hash = binary.LittleEndian.Uint64(r.b)
		r.b = r.b[8:]
	} else {
		r.fail("short spec hash")
	}
	return s
}

// Create adds a job if its id is free (POST semantics): an existing job with
// the same spec hash is reported as Exists, any other as Conflict.
// CollInc is the collection's incarnation as the proposer knew it
// (model.Collection.Incarnation): a create for an incarnation the slot has
// fenced off (PurgeCollection) is Rejected. It is written only when not
// zero, so a create of a collection made before incarnations keeps the
// earlier bytes.
type Create struct {
	Coll, ID string
	Spec     model.JobSpec
	Now      int64
	CollInc  uint64
}

// Type implements Command.
func (*Create) Type() CmdType { return CmdCreate }
func (c *Create) appendBody(dst []byte) []byte {
	dst = putStr(putStr(dst, c.Coll), c.ID)
	dst = binary.AppendVarint(appendSpec(dst, &c.Spec), c.Now)
	if c.CollInc != 0 {
		dst = binary.AppendUvarint(dst, c.CollInc)
	}
	return dst
}

// Upsert creates or replaces a job (PUT semantics). IfMatch, when non-zero,
// must equal the current version. CollInc is as for Create.
type Upsert struct {
	Coll, ID string
	Spec     model.JobSpec
	IfMatch  uint64
	Now      int64
	CollInc  uint64
}

// Type implements Command.
func (*Upsert) Type() CmdType { return CmdUpsert }
func (c *Upsert) appendBody(dst []byte) []byte {
	dst = putStr(putStr(dst, c.Coll), c.ID)
	dst = binary.AppendUvarint(appendSpec(dst, &c.Spec), c.IfMatch)
	dst = binary.AppendVarint(dst, c.Now)
	if c.CollInc != 0 {
		dst = binary.AppendUvarint(dst, c.CollInc)
	}
	return dst
}

// Delete removes a job.
type Delete struct{ Coll, ID string }

// Type implements Command.
func (*Delete) Type() CmdType { return CmdDelete }
func (c *Delete) appendBody(dst []byte) []byte {
	return putStr(putStr(dst, c.Coll), c.ID)
}

// DeleteIncarnation deletes a job only if its created_at is CreatedAt: the
// incarnation its sender read. A job deleted and created again since is
// another incarnation and stays (the answer is not found). A plain Delete
// re-sent after its outcome was unknown would delete a job its client
// created again after giving up on the first DELETE.
type DeleteIncarnation struct {
	Coll, ID  string
	CreatedAt int64
}

// Type implements Command.
func (*DeleteIncarnation) Type() CmdType { return CmdDeleteIncarnation }
func (c *DeleteIncarnation) appendBody(dst []byte) []byte {
	return binary.AppendVarint(putStr(putStr(dst, c.Coll), c.ID), c.CreatedAt)
}

// DropTombstones removes the tombstones of deleted incarnations created
// before Before (ms): the leader proposes it once they are older than any
// re-send of their creates can be (slot.tombstoneKeep).
type DropTombstones struct{ Before int64 }

// Type implements Command.
func (*DropTombstones) Type() CmdType { return CmdDropTombstones }
func (c *DropTombstones) appendBody(dst []byte) []byte {
	return binary.AppendVarint(dst, c.Before)
}

// Ack finishes the fired version of a job: succeeded, or failed for good.
type Ack struct {
	Coll, ID  string
	Version   uint64
	Success   bool
	Attempts  int64
	LastError string
	Now       int64
}

// Type implements Command.
func (*Ack) Type() CmdType { return CmdAck }
func (c *Ack) appendBody(dst []byte) []byte {
	dst = putStr(putStr(dst, c.Coll), c.ID)
	dst = binary.AppendUvarint(dst, c.Version)
	s := byte(0)
	if c.Success {
		s = 1
	}
	dst = append(dst, s)
	dst = binary.AppendVarint(dst, c.Attempts)
	dst = putStr(dst, c.LastError)
	return binary.AppendVarint(dst, c.Now)
}

// Retry moves the fired version of a job to its next attempt time, which the
// leader computed (backoff with jitter, or Retry-After).
type Retry struct {
	Coll, ID  string
	Version   uint64
	NextDue   int64
	Attempts  int64
	LastError string
	Now       int64
}

// Type implements Command.
func (*Retry) Type() CmdType { return CmdRetry }
func (c *Retry) appendBody(dst []byte) []byte {
	dst = putStr(putStr(dst, c.Coll), c.ID)
	dst = binary.AppendUvarint(dst, c.Version)
	dst = binary.AppendVarint(dst, c.NextDue)
	dst = binary.AppendVarint(dst, c.Attempts)
	dst = putStr(dst, c.LastError)
	return binary.AppendVarint(dst, c.Now)
}

// Reschedule sets a new occurrence of a job from the receiver's answer:
// a new trigger time, attempts reset.
type Reschedule struct {
	Coll, ID    string
	Version     uint64
	TriggerTime int64
	Now         int64
}

// Type implements Command.
func (*Reschedule) Type() CmdType { return CmdReschedule }
func (c *Reschedule) appendBody(dst []byte) []byte {
	dst = putStr(putStr(dst, c.Coll), c.ID)
	dst = binary.AppendUvarint(dst, c.Version)
	dst = binary.AppendVarint(dst, c.TriggerTime)
	return binary.AppendVarint(dst, c.Now)
}

// AdvanceOffset proposes a new scan offset. The FSM never lets the offset
// pass a live due entry, whatever the leader proposes.
type AdvanceOffset struct{ Offset int64 }

// Type implements Command.
func (*AdvanceOffset) Type() CmdType { return CmdAdvanceOffset }
func (c *AdvanceOffset) appendBody(dst []byte) []byte {
	return binary.AppendVarint(dst, c.Offset)
}

// DropDue removes a due entry whose job no longer wants it (deleted, purged
// with its collection, or moved); it is a no-op when the entry is still live.
type DropDue struct {
	Due      int64
	Coll, ID string
}

// Type implements Command.
func (*DropDue) Type() CmdType { return CmdDropDue }
func (c *DropDue) appendBody(dst []byte) []byte {
	dst = binary.AppendVarint(dst, c.Due)
	return putStr(putStr(dst, c.Coll), c.ID)
}

// RemoveFinished removes up to Limit finished jobs of a collection that
// finished before Before (retention).
type RemoveFinished struct {
	Coll   string
	Before int64
	Limit  int64
}

// Type implements Command.
func (*RemoveFinished) Type() CmdType { return CmdRemoveFinished }
func (c *RemoveFinished) appendBody(dst []byte) []byte {
	dst = putStr(dst, c.Coll)
	dst = binary.AppendVarint(dst, c.Before)
	return binary.AppendVarint(dst, c.Limit)
}

// PurgeCollection removes up to Limit jobs of a deleted collection.
//
// Fence, when not zero, is the deleted collection's incarnation plus one:
// the slot then refuses (Rejected) every later Create, Upsert and
// PutSchedule of that collection whose CollInc is below it — one from a
// node whose meta state had not yet heard of the deletion would otherwise
// land after the purge and outlive the DELETE (raftfsm/DESIGN.md,
// "Collection fences"). Written only when not zero.
type PurgeCollection struct {
	Coll  string
	Limit int64
	Fence uint64
}

// Type implements Command.
func (*PurgeCollection) Type() CmdType { return CmdPurgeCollection }
func (c *PurgeCollection) appendBody(dst []byte) []byte {
	dst = binary.AppendVarint(putStr(dst, c.Coll), c.Limit)
	if c.Fence != 0 {
		dst = binary.AppendUvarint(dst, c.Fence)
	}
	return dst
}

// PutCollection creates or replaces a collection's configuration.
type PutCollection struct {
	C   model.Collection
	Now int64
}

// Type implements Command.
func (*PutCollection) Type() CmdType { return CmdPutCollection }
func (c *PutCollection) appendBody(dst []byte) []byte {
	return binary.AppendVarint(appendCollection(dst, &c.C), c.Now)
}

// MarkCollectionDeleting starts a collection's deletion: it takes no new
// jobs while its slots purge the old ones.
type MarkCollectionDeleting struct {
	Name string
	Now  int64
}

// Type implements Command.
func (*MarkCollectionDeleting) Type() CmdType { return CmdMarkCollDeleting }
func (c *MarkCollectionDeleting) appendBody(dst []byte) []byte {
	return binary.AppendVarint(putStr(dst, c.Name), c.Now)
}

// ForgetCollection ends a deletion once every slot has purged its jobs.
type ForgetCollection struct{ Name string }

// Type implements Command.
func (*ForgetCollection) Type() CmdType                  { return CmdForgetCollection }
func (c *ForgetCollection) appendBody(dst []byte) []byte { return putStr(dst, c.Name) }

// PutRoute creates or replaces a route.
type PutRoute struct {
	R   model.Route
	Now int64
}

// Type implements Command: CmdPutRouteV3 for a pipelined route,
// CmdPutRouteV2 when the route has other delivery control, CmdPutRoute
// otherwise; each route is written in the oldest form that holds it.
func (c *PutRoute) Type() CmdType {
	if c.R.Pipeline {
		return CmdPutRouteV3
	}
	if c.R.Paced() {
		return CmdPutRouteV2
	}
	return CmdPutRoute
}

func (c *PutRoute) appendBody(dst []byte) []byte {
	dst = appendRoute(dst, &c.R)
	if c.R.Paced() || c.R.Pipeline {
		dst = appendRouteDelivery(dst, &c.R)
	}
	if c.R.Pipeline {
		dst = binary.AppendUvarint(dst, routePipelineFlag)
	}
	return binary.AppendVarint(dst, c.Now)
}

// DeleteRoute removes a route.
type DeleteRoute struct{ Name string }

// Type implements Command.
func (*DeleteRoute) Type() CmdType                  { return CmdDeleteRoute }
func (c *DeleteRoute) appendBody(dst []byte) []byte { return putStr(dst, c.Name) }

func appendCollection(dst []byte, c *model.Collection) []byte {
	dst = putStr(dst, c.Name)
	dst = appendRetry(dst, c.Retry)
	dst = binary.AppendVarint(dst, c.CallbackTimeoutMs)
	dst = binary.AppendVarint(dst, c.RetentionMs)
	dst = putStr(dst, c.SigningSecret)
	d := byte(0)
	if c.Deleting {
		d = 1
	}
	dst = append(dst, d)
	dst = binary.AppendVarint(dst, c.CreatedAt)
	return binary.AppendVarint(dst, c.UpdatedAt)
}

func (r *reader) collection() model.Collection {
	var c model.Collection
	c.Name = r.str(maxStr)
	c.Retry = r.retryPolicy()
	c.CallbackTimeoutMs = r.varint()
	c.RetentionMs = r.varint()
	c.SigningSecret = r.str(maxStr)
	c.Deleting = r.byte() == 1
	c.CreatedAt = r.varint()
	c.UpdatedAt = r.varint()
	return c
}

func appendRoute(dst []byte, rt *model.Route) []byte {
	dst = putStr(dst, rt.Name)
	dst = putStr(dst, rt.WebhookURL)
	keys := make([]string, 0, len(rt.Headers))
	for k := range rt.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic bytes for the same route
	dst = binary.AppendUvarint(dst, uint64(len(keys)))
	for _, k := range keys {
		dst = putStr(putStr(dst, k), rt.Headers[k])
	}
	dst = putStr(dst, rt.SigningSecret)
	dst = binary.AppendVarint(dst, rt.TimeoutMs)
	dst = binary.AppendVarint(dst, rt.CreatedAt)
	return binary.AppendVarint(dst, rt.UpdatedAt)
}

func (r *reader) route() model.Route {
	var rt model.Route
	rt.Name = r.str(maxStr)
	rt.WebhookURL = r.str(maxStr)
	n := r.uvarint()
	if n > 1024 {
		r.fail("too many headers")
		n = 0
	}
	if n > 0 {
		rt.Headers = make(map[string]string, n)
		for i := uint64(0); i < n && r.err == nil; i++ {
			k := r.str(maxStr)
			rt.Headers[k] = r.str(maxStr)
		}
	}
	rt.SigningSecret = r.str(maxStr)
	rt.TimeoutMs = r.varint()
	rt.CreatedAt = r.varint()
	rt.UpdatedAt = r.varint()
	return rt
}

// appendRouteDelivery appends a route's delivery control (CmdPutRouteV2).
func appendRouteDelivery(dst []byte, rt *model.Route) []byte {
	dst = putF64(dst, rt.RateLimit.PerSecond)
	dst = binary.AppendVarint(dst, rt.RateLimit.Burst)
	dst = binary.AppendVarint(dst, rt.MaxInFlight)
	dst = binary.AppendVarint(dst, rt.Batch.MaxJobs)
	return binary.AppendVarint(dst, rt.Batch.MaxWaitMs)
}

func (r *reader) routeDelivery(rt *model.Route) {
	rt.RateLimit.PerSecond = r.f64()
	rt.RateLimit.Burst = r.varint()
	rt.MaxInFlight = r.varint()
	rt.Batch.MaxJobs = r.varint()
	rt.Batch.MaxWaitMs = r.varint()
}

// EncodeOne encodes a single command; EncodeBatch joins several encoded
// commands into one entry. Splitting the two lets many goroutines encode in
// parallel while one proposer only concatenates.
func EncodeOne(c Command) []byte {
	var dst []byte
	if h, ok := c.(interface{ sizeHint() int }); ok {
		dst = make([]byte, 0, h.sizeHint())
	}
	return appendCommand(dst, c)
}

// EncodeBatch joins encoded commands into one raft entry.
func EncodeBatch(encoded [][]byte) []byte {
	if len(encoded) == 1 {
		return encoded[0]
	}
	n := 12
	for _, e := range encoded {
		n += len(e) + binary.MaxVarintLen32
	}
	dst := make([]byte, 0, n)
	dst = append(dst, byte(CmdBatch), v1)
	dst = binary.AppendUvarint(dst, uint64(len(encoded)))
	for _, e := range encoded {
		dst = putBytes(dst, e)
	}
	return dst
}
