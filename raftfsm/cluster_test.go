package raftfsm

import (
	"bytes"
	"fmt"
	"io"
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

// Preferred leaders: set only to one of the slot's replicas, kept by a
// placement change that keeps that replica, dropped by one that does not
// and by removing the node; a removed node leaves a tombstone that a
// re-join (UpsertNode) clears.
func TestPreferredLeadersAndTombstones(t *testing.T) {
	f := NewMetaFSM()
	applyMeta(t, f, 1, &InitCluster{SlotCount: 3, Now: 5,
		Nodes: []model.Node{{ID: "n1", Status: model.NodeAlive}, {ID: "n2", Status: model.NodeAlive}, {ID: "n3", Status: model.NodeAlive}},
		Slots: []model.SlotEntry{{Replicas: []string{"n1", "n2"}, Epoch: 1}, {Replicas: []string{"n2", "n3"}, Epoch: 1}, {Replicas: []string{"n3", "n1"}, Epoch: 1}}})
	r := applyMeta(t, f, 2, &SetPreferredLeaders{Updates: []PreferredUpdate{{Slot: 0, Node: "n2"}, {Slot: 1, Node: "n1"}, {Slot: 2, Node: "n1"}}})
	if r[0].Code != model.CodeRejected || r[0].N != 2 {
		t.Fatalf("set preferred: %+v (n1 holds no replica of slot 1)", r[0])
	}
	st := f.State()
	if st.Slots[0].PreferredLeader != "n2" || st.Slots[1].PreferredLeader != "" || st.Slots[2].PreferredLeader != "n1" {
		t.Fatalf("preferred = %q %q %q", st.Slots[0].PreferredLeader, st.Slots[1].PreferredLeader, st.Slots[2].PreferredLeader)
	}
	applyMeta(t, f, 3, &SetSlots{Updates: []SlotUpdate{
		{Slot: 0, Replicas: []string{"n1", "n2", "n3"}, ExpectEpoch: 1}, // keeps n2
		{Slot: 2, Replicas: []string{"n3", "n2"}, ExpectEpoch: 1},       // drops n1
	}})
	st = f.State()
	if st.Slots[0].PreferredLeader != "n2" || st.Slots[2].PreferredLeader != "" {
		t.Fatalf("after placement: %q %q", st.Slots[0].PreferredLeader, st.Slots[2].PreferredLeader)
	}
	if r := applyMeta(t, f, 4, &ForgetNode{ID: "n2", At: 100, StartedAt: 50}); r[0].Code != model.CodeOK {
		t.Fatalf("forget: %v", r[0].Code)
	}
	st = f.State()
	if _, ok := st.Nodes["n2"]; ok || st.Slots[0].PreferredLeader != "" {
		t.Fatalf("n2 still a node or a preferred leader: %+v %q", st.Nodes["n2"], st.Slots[0].PreferredLeader)
	}
	if tb, ok := st.Tombstone("n2"); !ok || tb.At != 100 || tb.StartedAt != 50 {
		t.Fatalf("tombstone %+v", tb)
	}
	if r := applyMeta(t, f, 5, &ForgetNode{ID: "n2", At: 101}); r[0].Code != model.CodeNotFound {
		t.Fatalf("forgetting twice: %v", r[0].Code)
	}
	applyMeta(t, f, 6, &UpsertNode{N: model.Node{ID: "n2", Status: model.NodeAlive}, Now: 200})
	if _, ok := f.State().Tombstone("n2"); ok {
		t.Fatal("a re-joined node kept its tombstone")
	}
	if _, ok := st.Tombstone("n2"); !ok {
		t.Fatal("an older state version changed: states must be immutable")
	}
}

// The slot table of the largest clusters we plan for (4,096 slots on 100
// nodes) forms in one InitCluster entry and decodes back unchanged; its
// size is what docs/scaling.md counts for the meta group.
func TestInitClusterAtScale(t *testing.T) {
	const slots, nodes = 4096, 100
	init := &InitCluster{SlotCount: slots, ReplicationFactor: 3, Now: 5}
	for i := 0; i < nodes; i++ {
		id := fmt.Sprintf("node-%03d", i)
		init.Nodes = append(init.Nodes, model.Node{ID: id, HTTPAddr: "10.0.0.1:8080", BindAddr: "10.0.0.1:7000", SerfAddr: "10.0.0.1:7946", Status: model.NodeAlive})
	}
	for s := 0; s < slots; s++ {
		init.Slots = append(init.Slots, model.SlotEntry{Replicas: []string{init.Nodes[s%nodes].ID, init.Nodes[(s+1)%nodes].ID, init.Nodes[(s+2)%nodes].ID}, Epoch: 1})
	}
	b := Encode(init)
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("%d commands", len(got))
	}
	back, ok := got[0].(*InitCluster)
	if !ok || back.SlotCount != slots || len(back.Slots) != slots || len(back.Nodes) != nodes || back.Slots[4095].Replicas[2] != init.Slots[4095].Replicas[2] {
		t.Fatalf("decoded %T %+v", got[0], back)
	}
	t.Logf("InitCluster with %d slots on %d nodes: %d bytes", slots, nodes, len(b))
}

// TestRouteDeliveryControlSurvivesSnapshot: a route's rate limit, in-flight
// cap, batch and pipeline flag go through apply and a meta snapshot
// unchanged, and a route without them has none after either.
func TestRouteDeliveryControlSurvivesSnapshot(t *testing.T) {
	f := NewMetaFSM()
	paced := model.Route{Name: "paced", WebhookURL: "http://x", RateLimit: model.RateLimit{PerSecond: 2.5, Burst: 7}, MaxInFlight: 3,
		Batch: model.BatchPolicy{MaxJobs: 100, MaxWaitMs: 20}}
	applyMeta(t, f, 1, &PutRoute{R: paced, Now: 5}, &PutRoute{R: model.Route{Name: "plain", WebhookURL: "http://y"}, Now: 5},
		&PutRoute{R: model.Route{Name: "pipelined", WebhookURL: "http://z", Pipeline: true}, Now: 5})
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	s := &sink{}
	if err := snap.Persist(s); err != nil {
		t.Fatal(err)
	}
	g := NewMetaFSM()
	if err := g.Restore(io.NopCloser(bytes.NewReader(s.Bytes()))); err != nil {
		t.Fatal(err)
	}
	for _, st := range []*MetaState{f.State(), g.State()} {
		got, ok := st.Route("paced")
		if !ok || got.RateLimit != paced.RateLimit || got.MaxInFlight != 3 || got.Batch != paced.Batch || !got.Paced() {
			t.Fatalf("paced: %+v", got)
		}
		plain, _ := st.Route("plain")
		if plain.Paced() || plain.Pipeline || got.Pipeline {
			t.Fatalf("plain: %+v, paced: %+v", plain, got)
		}
		pl, ok := st.Route("pipelined")
		if !ok || !pl.Pipeline || pl.Paced() {
			t.Fatalf("pipelined: %+v", pl)
		}
	}
}
