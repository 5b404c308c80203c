package raftfsm

import (
	"encoding/binary"
	"fmt"

	"github.com/timemachine-db/timemachine/model"
)

// Results travel between nodes when a write is forwarded to a slot's
// leader: code | more | n | job? (collection, id, record).
const resultsV1 = 1

// EncodeResults encodes command results.
func EncodeResults(res []model.Result) []byte {
	dst := []byte{resultsV1}
	dst = binary.AppendUvarint(dst, uint64(len(res)))
	for _, r := range res {
		more := byte(0)
		if r.More {
			more = 1
		}
		dst = append(dst, byte(r.Code), more)
		dst = binary.AppendVarint(dst, r.N)
		if r.Schedule != nil {
			// 2: a schedule, then the job part as below.
			dst = append(dst, 2)
			dst = putStr(dst, r.Schedule.Collection)
			dst = putStr(dst, r.Schedule.ID)
			dst = putBytes(dst, AppendScheduleRecord(nil, r.Schedule))
		}
		if r.Job == nil {
			dst = append(dst, 0)
			continue
		}
		dst = append(dst, 1)
		dst = putStr(dst, r.Job.Collection)
		dst = putStr(dst, r.Job.ID)
		j := r.Job
		if j.Status == model.StatusFiring {
			// Not a stored status: the record says scheduled, the code
			// CodeFiring (DecodeResults puts it back).
			c := *j
			c.Status = model.StatusScheduled
			j = &c
		}
		dst = putBytes(dst, AppendRecord(nil, j))
	}
	return dst
}

// DecodeResults decodes what EncodeResults wrote.
func DecodeResults(b []byte) ([]model.Result, error) {
	if len(b) < 1 || b[0] != resultsV1 {
		return nil, fmt.Errorf("%w: results format", ErrCorrupt)
	}
	r := reader{b: b[1:]}
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("results count")
	}
	out := make([]model.Result, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		res := model.Result{Code: model.Code(r.byte()), More: r.byte() == 1, N: r.varint()}
		tag := r.byte()
		if tag == 2 {
			sc := &model.Schedule{Collection: r.str(maxStr), ID: r.str(maxStr)}
			rec := r.bytes(maxMeta + 64<<10)
			if r.err == nil {
				if err := DecodeScheduleRecord(rec, sc); err != nil {
					return nil, err
				}
			}
			res.Schedule = sc
			tag = r.byte()
		}
		if tag == 1 {
			j := &model.Job{Collection: r.str(maxStr), ID: r.str(maxStr)}
			rec := r.bytes(maxMeta + 64<<10)
			if r.err == nil {
				if err := DecodeRecord(rec, j); err != nil {
					return nil, err
				}
				if res.Code == model.CodeFiring && j.Status == model.StatusScheduled {
					j.Status = model.StatusFiring
				}
			}
			res.Job = j
		}
		out = append(out, res)
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return out, nil
}

// SplitBatch returns the encoded commands of a raft entry (one command, or
// the members of a batch) without decoding them.
func SplitBatch(b []byte) ([][]byte, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: short entry", ErrCorrupt)
	}
	if CmdType(b[0]) != CmdBatch {
		return [][]byte{b}, nil
	}
	r := reader{b: b[2:]}
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.fail("batch count")
	}
	out := make([][]byte, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		out = append(out, r.bytes(len(r.b)))
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return out, nil
}
