package raftfsm

import (
	"encoding/binary"

	"github.com/timemachine-db/timemachine/model"
)

// CmdAckMany finishes many fired jobs of one collection in one command
// (20: 12–19 belong to schedules and redrive).
const CmdAckMany CmdType = 20

// AckMany finishes the fired versions of many jobs of one collection:
// what a batched delivery commits for the jobs its answer finished
// (succeeded, or failed for good). Each job is applied exactly as an Ack
// of its own would be — a job deleted, replaced or already finished since
// it was fired is left alone (its entry is stale) — but the leader
// encodes, and every replica decodes, one command for the whole batch
// instead of one per job, and the state machine applies them with the
// scratch buffers of one pass. All jobs share Now (the batch's answer
// time, their finished_at).
type AckMany struct {
	Coll string
	Now  int64
	Jobs []AckJob
}

// AckJob is one job of an AckMany.
type AckJob struct {
	ID        string
	Version   uint64
	Success   bool
	Attempts  int64
	LastError string
}

// Type implements Command.
func (*AckMany) Type() CmdType { return CmdAckMany }

// Flags of one AckJob's encoding.
const (
	ackSuccess   = 1 << 0
	ackLastError = 1 << 1
)

func (c *AckMany) appendBody(dst []byte) []byte {
	dst = putStr(dst, c.Coll)
	dst = binary.AppendVarint(dst, c.Now)
	dst = binary.AppendUvarint(dst, uint64(len(c.Jobs)))
	for i := range c.Jobs {
		a := &c.Jobs[i]
		dst = putStr(dst, a.ID)
		dst = binary.AppendUvarint(dst, a.Version)
		var f byte
		if a.Success {
			f |= ackSuccess
		}
		if a.LastError != "" {
			f |= ackLastError
		}
		dst = append(dst, f)
		dst = binary.AppendVarint(dst, a.Attempts)
		if a.LastError != "" {
			dst = putStr(dst, a.LastError)
		}
	}
	return dst
}

// sizeHint is about the encoded size, so EncodeOne allocates once.
func (c *AckMany) sizeHint() int {
	n := 2 + len(c.Coll) + 2*binary.MaxVarintLen64
	for i := range c.Jobs {
		n += len(c.Jobs[i].ID) + len(c.Jobs[i].LastError) + 16
	}
	return n
}

// ackManyMinJob is the fewest bytes one encoded AckJob takes (an empty id,
// version, flags, attempts): the count is checked against it so a corrupt
// count never makes the decoder allocate more than the bytes it was given
// can describe.
const ackManyMinJob = 4

func (r *reader) ackMany() *AckMany {
	x := &AckMany{Coll: r.str(maxStr), Now: r.varint()}
	n := r.uvarint()
	if r.err == nil && (n > maxEntries || n > uint64(len(r.b))/ackManyMinJob) {
		r.fail("ack count")
	}
	if r.err != nil {
		return x
	}
	x.Jobs = make([]AckJob, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		a := AckJob{ID: r.str(maxStr), Version: r.uvarint()}
		f := r.byte()
		if f&^(ackSuccess|ackLastError) != 0 {
			r.fail("ack flags")
			break
		}
		a.Success = f&ackSuccess != 0
		a.Attempts = r.varint()
		if f&ackLastError != 0 {
			a.LastError = r.str(maxStr)
		}
		x.Jobs = append(x.Jobs, a)
	}
	return x
}

// ackMany applies each job's ack. Result.N counts the jobs it finished;
// the others were stale.
func (s *applyState) ackMany(c *AckMany) (model.Result, error) {
	var n int64
	for i := range c.Jobs {
		a := &c.Jobs[i]
		res, err := s.finish(c.Coll, a.ID, a.Version, a.Success, a.Attempts, a.LastError, c.Now)
		if err != nil {
			return model.Result{}, err
		}
		if res.Code == model.CodeOK {
			n++
		}
	}
	return model.Result{Code: model.CodeOK, N: n}, nil
}
