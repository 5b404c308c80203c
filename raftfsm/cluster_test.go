package raftfsm

import (
	"testing"

	"github.com/hashicorp/raft"
	"github.com/timemachine-db/timemachine/model"
)

func applyMeta(t *testing.T, f *MetaFSM, idx uint64, cmds ...Command) []model.Result {
	t.Helper()
	out := f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: Encode(cmds...)})
	res, ok := out.([]model.Result)
	if !ok {
		t.Fatalf("apply: %v", out)
	}
	return res
}

func TestClusterStateCommands(t *testing.T) {
	f := NewMetaFSM()
	init := &InitCluster{SlotCount: 2, ReplicationFactor: 0, Now: 5,
		Nodes: []model.Node{{ID: "n1", Status: model.NodeAlive}},
		Slots: []model.SlotEntry{{Replicas: []string{"n1"}, Epoch: 1}, {Replicas: []string{"n1"}, Epoch: 1}}}
	if r := applyMeta(t, f, 1, init); r[0].Code != model.CodeOK || !f.State().Formed() {
		t.Fatalf("init: %v formed=%v", r[0].Code, f.State().Formed())
	}
	if r := applyMeta(t, f, 2, init); r[0].Code != model.CodeRejected {
		t.Fatalf("second init: %v", r[0].Code)
	}
	if r := applyMeta(t, f, 3, &UpsertNode{N: model.Node{ID: "n2", Status: model.NodeAlive}, Now: 7}); r[0].Code != model.CodeCreated {
		t.Fatalf("new node: %v", r[0].Code)
	}
	if n := f.State().Nodes["n2"]; n.JoinedAt != 7 || n.Since != 7 {
		t.Fatalf("n2 = %+v", n)
	}
	applyMeta(t, f, 4, &UpsertNode{N: model.Node{ID: "n2", Status: model.NodeFailed}, Now: 9})
	if n := f.State().Nodes["n2"]; n.Status != model.NodeFailed || n.Since != 9 || n.JoinedAt != 7 {
		t.Fatalf("n2 after failure = %+v", n)
	}
	before := f.State()
	// Compare-and-set on the epoch: the stale update is refused.
	r := applyMeta(t, f, 5, &SetSlots{Updates: []SlotUpdate{
		{Slot: 0, Replicas: []string{"n1", "n2"}, ExpectEpoch: 1},
		{Slot: 1, Replicas: []string{"n2"}, ExpectEpoch: 7},
	}})
	if r[0].Code != model.CodeStale || r[0].N != 1 {
		t.Fatalf("set slots: %+v", r[0])
	}
	st := f.State()
	if e := st.Slots[0]; e.Epoch != 2 || len(e.Replicas) != 2 {
		t.Fatalf("slot 0 = %+v", e)
	}
	if e := st.Slots[1]; e.Epoch != 1 || e.Replicas[0] != "n1" {
		t.Fatalf("slot 1 = %+v", e)
	}
	if len(before.Slots[0].Replicas) != 1 {
		t.Fatal("an older state version changed: states must be immutable")
	}
	if r := applyMeta(t, f, 6, &RemoveNode{ID: "n2"}); r[0].Code != model.CodeOK || f.State().Nodes["n2"] != nil {
		t.Fatal("remove node")
	}
}
