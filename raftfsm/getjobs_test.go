package raftfsm

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/timemachine-db/timemachine/storage"
)

// GetJobs must find every existing record whatever the order of the refs
// and wherever the records live (memtable, flushed tables, both).
func TestGetJobsFindsEveryRecord(t *testing.T) {
	db := memDB(t)
	f := openFSM(t, db, 2)
	var refs []storage.DueEntry
	idx := uint64(1)
	for round := 0; round < 3; round++ {
		var cmds []Command
		for i := 0; i < 200; i++ {
			id := fmt.Sprintf("r%d-%03d", round, i)
			cmds = append(cmds, &Create{Coll: "c", ID: id, Spec: spec(int64(i), 1), Now: 1})
			refs = append(refs, storage.DueEntry{Due: int64(i), Coll: "c", ID: id})
		}
		f.ApplyBatch([]*raft.Log{{Index: idx, Type: raft.LogCommand, Data: Encode(cmds...)}})
		idx++
		if round < 2 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	refs = append(refs, storage.DueEntry{Coll: "c", ID: "missing"})
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 5; trial++ {
		rng.Shuffle(len(refs), func(i, j int) { refs[i], refs[j] = refs[j], refs[i] })
		jobs, err := GetJobs(db, 2, refs)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range refs {
			if e.ID == "missing" {
				if jobs[i] != nil {
					t.Fatal("found a job that does not exist")
				}
				continue
			}
			if jobs[i] == nil || jobs[i].ID != e.ID {
				t.Fatalf("trial %d: record %s not found by GetJobs (got %v)", trial, e.ID, jobs[i])
			}
		}
	}
}
