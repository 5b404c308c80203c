package raftfsm

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/storage"
)

// GetJob reads one job of a slot.
func GetJob(r storage.Reader, slot int, coll, id string) (*model.Job, bool, error) {
	v, ok, err := r.Get(storage.RecordKey(nil, slot, coll, id))
	if err != nil || !ok {
		return nil, false, err
	}
	j := &model.Job{Collection: coll, ID: id}
	if err := DecodeRecord(v, j); err != nil {
		return nil, false, fmt.Errorf("slot %d job %s/%s: %w", slot, coll, id, err)
	}
	return j, true, nil
}

// GetJobs reads several jobs of a slot with one iterator, which costs a
// fraction of a Get per job. jobs[i] is nil when refs[i] does not exist.
func GetJobs(r storage.Reader, slot int, refs []storage.DueEntry) ([]*model.Job, error) {
	return getJobs(r, slot, refs, nil)
}

// getJobs is GetJobs; seen, when set, is also handed each record read.
func getJobs(r storage.Reader, slot int, refs []storage.DueEntry, seen func(key, val []byte, j *model.Job)) ([]*model.Job, error) {
	out := make([]*model.Job, len(refs))
	if len(refs) == 0 {
		return out, nil
	}
	lo, hi := storage.RecordSpan(slot)
	it, err := r.NewIter(lo, hi)
	if err != nil {
		return nil, err
	}
	// Seek in key order: refs come in due order, which is random in the
	// record span, and forward seeks let Pebble step from where it is
	// instead of descending every level again.
	order := keyOrder(refs)
	var key []byte
	for _, i := range order {
		e := refs[i]
		key = storage.RecordKey(key[:0], slot, e.Coll, e.ID)
		if !it.SeekPrefixGE(key) || !bytes.Equal(it.Key(), key) {
			continue
		}
		j := &model.Job{Collection: e.Coll, ID: e.ID}
		if err := DecodeRecord(it.Value(), j); err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("slot %d job %s/%s: %w", slot, e.Coll, e.ID, err)
		}
		if seen != nil {
			seen(it.Key(), it.Value(), j)
		}
		out[i] = j
	}
	return out, it.Close()
}

// ScanDue calls fn for the due entries of a slot with from <= due < to, in
// due order, until fn returns false or limit entries were seen. It returns
// how many entries it passed to fn.
func ScanDue(r storage.Reader, slot int, from, to int64, limit int, fn func(storage.DueEntry) bool) (int, error) {
	if from >= to {
		return 0, nil
	}
	it, err := r.NewIter(storage.DueBound(slot, from), storage.DueBound(slot, to))
	if err != nil {
		return 0, err
	}
	n := 0
	for ok := it.First(); ok && n < limit; ok = it.Next() {
		e, err := storage.DecodeDueKey(it.Key())
		if err != nil {
			_ = it.Close()
			return n, err
		}
		n++
		if !fn(e) {
			break
		}
	}
	return n, it.Close()
}

// ListJobs lists the jobs of one collection in one slot in (trigger_time,
// id) order.
func ListJobs(r storage.Reader, slot int, q model.ListQuery) (model.ListPage, error) {
	var page model.ListPage
	if q.From >= q.To || q.Limit <= 0 {
		return page, nil
	}
	budget := q.Budget
	if budget <= 0 {
		budget = 10*q.Limit + 1000
	}
	lower := storage.ListBound(slot, q.Coll, q.From, "")
	if q.After != nil {
		// The smallest key after the cursor is the cursor's key plus a zero byte.
		if next := append(storage.ListBound(slot, q.Coll, q.After.Trigger, q.After.ID), 0); bytes.Compare(next, lower) > 0 {
			lower = next
		}
	}
	upper := storage.ListBound(slot, q.Coll, q.To, "")
	it, err := r.NewIter(lower, upper)
	if err != nil {
		return page, err
	}
	examined := 0
	for ok := it.First(); ok; ok = it.Next() {
		if len(page.Jobs) == q.Limit || examined == budget {
			page.Stopped = true
			break
		}
		examined++
		_, t, id, err := storage.DecodeListKey(it.Key())
		if err != nil {
			_ = it.Close()
			return page, err
		}
		page.Pos = model.ListPos{Trigger: t, ID: id}
		if q.Schedule != "" && !isOccurrenceOf(id, q.Schedule) {
			continue
		}
		j, found, err := GetJob(r, slot, q.Coll, id)
		if err != nil {
			_ = it.Close()
			return page, err
		}
		if found && (q.Status == 0 || j.Status == q.Status) && (q.Schedule == "" || j.Schedule == q.Schedule) {
			page.Jobs = append(page.Jobs, j)
		}
	}
	return page, it.Close()
}

// isOccurrenceOf tells from the id alone whether it can be an occurrence of
// schedule, so a filtered list reads no other record.
func isOccurrenceOf(id, schedule string) bool {
	sc, _, ok := model.SplitOccurrenceID(id)
	return ok && sc == schedule
}

// keyOrder is the order of refs by collection then id: the order of their
// record and schedule keys, in which a batch of reads seeks forward only.
func keyOrder(refs []storage.DueEntry) []int {
	order := make([]int, len(refs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := strings.Compare(refs[a].Coll, refs[b].Coll); c != 0 {
			return c
		}
		return strings.Compare(refs[a].ID, refs[b].ID)
	})
	return order
}
