package raftfsm

import (
	"encoding/binary"
	"sort"

	"github.com/timemachine-db/timemachine/model"
)

// NodeList returns every node sorted by id.
func (s *MetaState) NodeList() []*model.Node {
	out := make([]*model.Node, 0, len(s.Nodes))
	for _, n := range s.Nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Formed reports whether the cluster's slot table exists.
func (s *MetaState) Formed() bool { return s.SlotCount > 0 && len(s.Slots) == s.SlotCount }

// InitCluster records the cluster's shape when it forms: slot count,
// replication factor, the first nodes and the initial slot table. It is
// applied once; later calls are rejected.
type InitCluster struct {
	SlotCount         int
	ReplicationFactor int
	Nodes             []model.Node
	Slots             []model.SlotEntry
	Now               int64
}

// UpsertNode adds a node or updates its addresses and status.
type UpsertNode struct {
	N   model.Node
	Now int64
}

// SetSlots changes slot replica sets, each only if its epoch still is
// ExpectEpoch (so two controllers, or a stale one, cannot interleave).
type SetSlots struct {
	Updates []SlotUpdate
}

// SlotUpdate is one slot's new replica set.
type SlotUpdate struct {
	Slot        int
	Replicas    []string
	ExpectEpoch uint64
}

// RemoveNode forgets a node (drained or dead and already replaced).
type RemoveNode struct{ ID string }

// SetReplicationFactor changes the configured replication factor (0: auto).
type SetReplicationFactor struct{ RF int }

// SetPreferredLeaders sets (or, with Node "", clears) slots' preferred
// leaders. A node that is not one of the slot's replicas is refused
// (CodeRejected for the command; the other updates still apply).
type SetPreferredLeaders struct {
	Updates []PreferredUpdate
}

// PreferredUpdate is one slot's new preferred leader.
type PreferredUpdate struct {
	Slot int
	Node string
}

// ForgetNode removes a node and leaves its tombstone (admin remove): its
// entry in the node table goes, and it stops being any slot's preferred
// leader. StartedAt is the process start time the node published in
// gossip (0: unknown).
type ForgetNode struct {
	ID        string
	At        int64
	StartedAt int64
}

// Type implements Command.
func (*SetPreferredLeaders) Type() CmdType { return CmdSetPreferred }

// Type implements Command.
func (*ForgetNode) Type() CmdType { return CmdForgetNode }

func (c *SetPreferredLeaders) appendBody(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(c.Updates)))
	for _, u := range c.Updates {
		dst = binary.AppendVarint(dst, int64(u.Slot))
		dst = putStr(dst, u.Node)
	}
	return dst
}

func (r *reader) setPreferred() *SetPreferredLeaders {
	c := &SetPreferredLeaders{}
	n := r.uvarint()
	if n > 1<<16 {
		r.fail("too many preferred-leader updates")
		return c
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		c.Updates = append(c.Updates, PreferredUpdate{Slot: int(r.varint()), Node: r.str(maxStr)})
	}
	return c
}

func (c *ForgetNode) appendBody(dst []byte) []byte {
	dst = putStr(dst, c.ID)
	dst = binary.AppendVarint(dst, c.At)
	return binary.AppendVarint(dst, c.StartedAt)
}

// Type implements Command.
func (*InitCluster) Type() CmdType { return CmdInitCluster }

// Type implements Command.
func (*UpsertNode) Type() CmdType { return CmdUpsertNode }

// Type implements Command.
func (*SetSlots) Type() CmdType { return CmdSetSlots }

// Type implements Command.
func (*RemoveNode) Type() CmdType { return CmdRemoveNode }

// Type implements Command.
func (*SetReplicationFactor) Type() CmdType { return CmdSetRF }

func appendNode(dst []byte, n *model.Node) []byte {
	dst = putStr(dst, n.ID)
	dst = putStr(dst, n.HTTPAddr)
	dst = putStr(dst, n.BindAddr)
	dst = putStr(dst, n.SerfAddr)
	dst = putStr(dst, string(n.Status))
	dst = binary.AppendVarint(dst, n.Since)
	return binary.AppendVarint(dst, n.JoinedAt)
}

func (r *reader) node() model.Node {
	var n model.Node
	n.ID = r.str(maxStr)
	n.HTTPAddr = r.str(maxStr)
	n.BindAddr = r.str(maxStr)
	n.SerfAddr = r.str(maxStr)
	n.Status = model.NodeStatus(r.str(maxStr))
	n.Since = r.varint()
	n.JoinedAt = r.varint()
	return n
}

func appendStrs(dst []byte, ss []string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ss)))
	for _, s := range ss {
		dst = putStr(dst, s)
	}
	return dst
}

func (r *reader) strs() []string {
	n := r.uvarint()
	if n > 1024 {
		r.fail("too many strings")
		return nil
	}
	out := make([]string, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		out = append(out, r.str(maxStr))
	}
	return out
}

func (c *InitCluster) appendBody(dst []byte) []byte {
	dst = binary.AppendVarint(dst, int64(c.SlotCount))
	dst = binary.AppendVarint(dst, int64(c.ReplicationFactor))
	dst = binary.AppendUvarint(dst, uint64(len(c.Nodes)))
	for i := range c.Nodes {
		dst = appendNode(dst, &c.Nodes[i])
	}
	dst = binary.AppendUvarint(dst, uint64(len(c.Slots)))
	for _, e := range c.Slots {
		dst = appendStrs(dst, e.Replicas)
		dst = binary.AppendUvarint(dst, e.Epoch)
	}
	return binary.AppendVarint(dst, c.Now)
}

func (r *reader) initCluster() *InitCluster {
	c := &InitCluster{SlotCount: int(r.varint()), ReplicationFactor: int(r.varint())}
	n := r.uvarint()
	if n > maxEntries {
		r.fail("too many nodes")
		return c
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		c.Nodes = append(c.Nodes, r.node())
	}
	n = r.uvarint()
	if n > 1<<16 {
		r.fail("too many slots")
		return c
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		e := model.SlotEntry{Replicas: r.strs()}
		e.Epoch = r.uvarint()
		c.Slots = append(c.Slots, e)
	}
	c.Now = r.varint()
	return c
}

func (c *UpsertNode) appendBody(dst []byte) []byte {
	return binary.AppendVarint(appendNode(dst, &c.N), c.Now)
}

func (c *SetSlots) appendBody(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(c.Updates)))
	for _, u := range c.Updates {
		dst = binary.AppendVarint(dst, int64(u.Slot))
		dst = appendStrs(dst, u.Replicas)
		dst = binary.AppendUvarint(dst, u.ExpectEpoch)
	}
	return dst
}

func (r *reader) setSlots() *SetSlots {
	c := &SetSlots{}
	n := r.uvarint()
	if n > 1<<16 {
		r.fail("too many slot updates")
		return c
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		u := SlotUpdate{Slot: int(r.varint()), Replicas: r.strs()}
		u.ExpectEpoch = r.uvarint()
		c.Updates = append(c.Updates, u)
	}
	return c
}

func (c *RemoveNode) appendBody(dst []byte) []byte { return putStr(dst, c.ID) }

func (c *SetReplicationFactor) appendBody(dst []byte) []byte {
	return binary.AppendVarint(dst, int64(c.RF))
}

// applyCluster applies the cluster commands to a (cloned) meta state.
func (s *MetaState) applyCluster(c Command) (model.Result, bool) {
	switch c := c.(type) {
	case *InitCluster:
		if s.Formed() || c.SlotCount <= 0 || len(c.Slots) != c.SlotCount {
			return model.Result{Code: model.CodeRejected}, true
		}
		s.SlotCount, s.ReplicationFactor = c.SlotCount, c.ReplicationFactor
		s.Slots = make([]model.SlotEntry, len(c.Slots))
		for i, e := range c.Slots {
			s.Slots[i] = e.Clone()
		}
		for i := range c.Nodes {
			n := c.Nodes[i]
			if n.JoinedAt == 0 {
				n.JoinedAt = c.Now
			}
			if n.Since == 0 {
				n.Since = c.Now
			}
			s.Nodes[n.ID] = &n
		}
		return model.Result{Code: model.CodeOK}, true
	case *UpsertNode:
		n := c.N
		if old, ok := s.Nodes[n.ID]; ok {
			n.JoinedAt = old.JoinedAt
			if old.Status == n.Status {
				n.Since = old.Since
			} else {
				n.Since = c.Now
			}
			if *old == n {
				return model.Result{Code: model.CodeOK}, true
			}
			s.Nodes[n.ID] = &n
			return model.Result{Code: model.CodeOK}, true
		}
		n.JoinedAt, n.Since = c.Now, c.Now
		s.Nodes[n.ID] = &n
		// A removed node that re-joined (the controller only adds one whose
		// process started after its removal) loses its tombstone.
		delete(s.Removed, n.ID)
		return model.Result{Code: model.CodeCreated}, true
	case *SetSlots:
		res := model.Result{Code: model.CodeOK}
		slots := append([]model.SlotEntry(nil), s.Slots...)
		for _, u := range c.Updates {
			if u.Slot < 0 || u.Slot >= len(slots) || slots[u.Slot].Epoch != u.ExpectEpoch {
				res.Code = model.CodeStale
				continue
			}
			e := model.SlotEntry{Replicas: append([]string(nil), u.Replicas...), Epoch: u.ExpectEpoch + 1}
			if p := slots[u.Slot].PreferredLeader; p != "" && e.Has(p) {
				e.PreferredLeader = p // still a replica: the operator's choice stays
			}
			slots[u.Slot] = e
			res.N++
		}
		s.Slots = slots
		return res, true
	case *RemoveNode:
		if _, ok := s.Nodes[c.ID]; !ok {
			return model.Result{Code: model.CodeNotFound}, true
		}
		delete(s.Nodes, c.ID)
		return model.Result{Code: model.CodeOK}, true
	case *SetReplicationFactor:
		s.ReplicationFactor = c.RF
		return model.Result{Code: model.CodeOK}, true
	case *SetPreferredLeaders:
		res := model.Result{Code: model.CodeOK}
		slots := append([]model.SlotEntry(nil), s.Slots...)
		for _, u := range c.Updates {
			if u.Slot < 0 || u.Slot >= len(slots) || (u.Node != "" && !slots[u.Slot].Has(u.Node)) {
				res.Code = model.CodeRejected
				continue
			}
			e := slots[u.Slot].Clone()
			e.PreferredLeader = u.Node
			slots[u.Slot] = e
			res.N++
		}
		s.Slots = slots
		return res, true
	case *ForgetNode:
		if _, ok := s.Nodes[c.ID]; !ok {
			return model.Result{Code: model.CodeNotFound}, true
		}
		delete(s.Nodes, c.ID)
		if s.Removed == nil {
			s.Removed = map[string]*model.RemovedNode{}
		}
		s.Removed[c.ID] = &model.RemovedNode{ID: c.ID, At: c.At, StartedAt: c.StartedAt}
		s.clearPreferred(c.ID)
		return model.Result{Code: model.CodeOK}, true
	}
	return model.Result{}, false
}

// clearPreferred drops node as preferred leader wherever it is one.
func (s *MetaState) clearPreferred(node string) {
	var slots []model.SlotEntry
	for i, e := range s.Slots {
		if e.PreferredLeader != node {
			continue
		}
		if slots == nil {
			slots = append([]model.SlotEntry(nil), s.Slots...)
		}
		x := e.Clone()
		x.PreferredLeader = ""
		slots[i] = x
	}
	if slots != nil {
		s.Slots = slots
	}
}

// Tombstone returns the tombstone of a removed node.
func (s *MetaState) Tombstone(id string) (*model.RemovedNode, bool) {
	t, ok := s.Removed[id]
	return t, ok
}
