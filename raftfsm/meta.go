package raftfsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"github.com/timemachine-db/timemachine/model"
)

// MetaState is one immutable version of the meta state. Readers get it
// without locks; Apply builds the next version and swaps the pointer.
type MetaState struct {
	Index       uint64                        `json:"index"`
	Collections ShardedMap[*model.Collection] `json:"collections"`
	Routes      ShardedMap[*model.Route]      `json:"routes"`

	// The cluster: its shape (fixed at formation), members and the desired
	// replica set of every slot.
	SlotCount         int                    `json:"slot_count"`
	ReplicationFactor int                    `json:"replication_factor"` // configured; 0 = min(3, nodes)
	Nodes             map[string]*model.Node `json:"nodes"`
	Slots             []model.SlotEntry      `json:"slots"`
	// Removed are the tombstones of nodes taken out (admin remove).
	Removed map[string]*model.RemovedNode `json:"removed,omitempty"`
}

// Collection returns a collection's config. The default collection exists
// even when it was never configured.
func (s *MetaState) Collection(name string) (*model.Collection, bool) {
	if c, ok := s.Collections.Get(name); ok {
		return c, true
	}
	if name == model.DefaultCollection {
		return &model.Collection{Name: model.DefaultCollection}, true
	}
	return nil, false
}

// CollectionList returns every collection, including the implicit default,
// sorted by name.
func (s *MetaState) CollectionList() []*model.Collection {
	out := make([]*model.Collection, 0, s.Collections.Len()+1)
	s.Collections.Range(func(_ string, c *model.Collection) bool {
		out = append(out, c)
		return true
	})
	if _, ok := s.Collections.Get(model.DefaultCollection); !ok {
		out = append(out, &model.Collection{Name: model.DefaultCollection})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Route returns a route.
func (s *MetaState) Route(name string) (*model.Route, bool) {
	return s.Routes.Get(name)
}

// RouteList returns every route sorted by name.
func (s *MetaState) RouteList() []*model.Route {
	out := make([]*model.Route, 0, s.Routes.Len())
	s.Routes.Range(func(_ string, r *model.Route) bool {
		out = append(out, r)
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (s *MetaState) clone() *MetaState {
	n := &MetaState{
		Index:             s.Index,
		Collections:       s.Collections.fork(), // copy-on-write (cowmap.go)
		Routes:            s.Routes.fork(),
		SlotCount:         s.SlotCount,
		ReplicationFactor: s.ReplicationFactor,
		Nodes:             make(map[string]*model.Node, len(s.Nodes)),
		Slots:             s.Slots, // copied on write by SetSlots
	}
	for k, v := range s.Nodes {
		n.Nodes[k] = v
	}
	if len(s.Removed) > 0 {
		n.Removed = make(map[string]*model.RemovedNode, len(s.Removed))
		for k, v := range s.Removed {
			n.Removed[k] = v
		}
	}
	return n
}

// MetaFSM is the meta group's state machine. Its state is small (the
// configuration of the cluster, not its data), so it lives in memory and is
// rebuilt from the latest snapshot plus the log on start.
type MetaFSM struct {
	state atomic.Pointer[MetaState]
	// OnChange, if set, is called after every applied change, outside any
	// lock, from raft's FSM goroutine. It must not block.
	OnChange func(*MetaState)
	// OnFatal, if set, stops the node: an entry holds a command this
	// binary does not know (ErrNewerCommand).
	OnFatal func(error)
}

// NewMetaFSM returns an empty meta state machine.
func NewMetaFSM() *MetaFSM {
	f := &MetaFSM{}
	f.state.Store(&MetaState{Nodes: map[string]*model.Node{}})
	return f
}

// State returns the current immutable state.
func (f *MetaFSM) State() *MetaState { return f.state.Load() }

// Apply implements raft.FSM.
func (f *MetaFSM) Apply(l *raft.Log) interface{} {
	cur := f.state.Load()
	if l.Index <= cur.Index {
		return []model.Result{}
	}
	next := cur.clone()
	next.Index = l.Index
	if l.Type != raft.LogCommand {
		f.state.Store(next)
		return nil
	}
	cmds, err := Decode(l.Data)
	if errors.Is(err, ErrNewerCommand) && f.OnFatal != nil {
		// Not applied, not skipped: the index stays, and the node stops.
		err = newerCommand("meta", l.Index, err)
		f.OnFatal(err)
		return err
	}
	if err != nil {
		f.state.Store(next)
		return fmt.Errorf("meta apply at index %d: %w", l.Index, err)
	}
	res := make([]model.Result, len(cmds))
	for i, c := range cmds {
		res[i] = next.apply(c)
	}
	f.state.Store(next)
	if f.OnChange != nil {
		f.OnChange(next)
	}
	return res
}

func (s *MetaState) apply(c Command) model.Result {
	if r, ok := s.applyCluster(c); ok {
		return r
	}
	switch c := c.(type) {
	case *PutCollection:
		nc := c.C
		old, ok := s.Collections.Get(nc.Name)
		if ok && old.Deleting {
			return model.Result{Code: model.CodeRejected}
		}
		nc.UpdatedAt = c.Now
		nc.CreatedAt = c.Now
		code := model.CodeCreated
		nc.Incarnation = s.Index // the entry that creates it (s.Index is this entry's)
		if ok {
			nc.CreatedAt = old.CreatedAt
			nc.Incarnation = old.Incarnation
			code = model.CodeOK
		} else if nc.Name == model.DefaultCollection {
			// default always exists (API.md §2): the first PUT replaces
			// its implicit configuration, it does not create it.
			code = model.CodeOK
		}
		nc.Deleting = false
		s.Collections.Set(nc.Name, &nc)
		return model.Result{Code: code}
	case *MarkCollectionDeleting:
		old, ok := s.Collection(c.Name)
		if !ok {
			return model.Result{Code: model.CodeNotFound}
		}
		if c.Name == model.DefaultCollection {
			return model.Result{Code: model.CodeRejected}
		}
		nc := *old
		nc.Deleting = true
		nc.UpdatedAt = c.Now
		s.Collections.Set(c.Name, &nc)
		return model.Result{Code: model.CodeOK}
	case *ForgetCollection:
		old, ok := s.Collections.Get(c.Name)
		if !ok {
			return model.Result{Code: model.CodeNotFound}
		}
		if !old.Deleting {
			return model.Result{Code: model.CodeRejected}
		}
		s.Collections.Delete(c.Name)
		return model.Result{Code: model.CodeOK}
	case *PutRoute:
		nr := c.R
		old, ok := s.Routes.Get(nr.Name)
		nr.CreatedAt, nr.UpdatedAt = c.Now, c.Now
		code := model.CodeCreated
		if ok {
			nr.CreatedAt = old.CreatedAt
			code = model.CodeOK
		}
		s.Routes.Set(nr.Name, &nr)
		return model.Result{Code: code}
	case *DeleteRoute:
		if _, ok := s.Routes.Get(c.Name); !ok {
			return model.Result{Code: model.CodeNotFound}
		}
		s.Routes.Delete(c.Name)
		return model.Result{Code: model.CodeOK}
	}
	return model.Result{Code: model.CodeRejected}
}

// Snapshot implements raft.FSM. The state is immutable, so the snapshot is
// just the pointer.
func (f *MetaFSM) Snapshot() (raft.FSMSnapshot, error) {
	return &metaSnapshot{s: f.state.Load()}, nil
}

// Restore implements raft.FSM.
func (f *MetaFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var env metaSnapshotEnvelope
	if err := json.NewDecoder(rc).Decode(&env); err != nil {
		return fmt.Errorf("restore meta snapshot: %w", err)
	}
	if env.Format != metaSnapshotFormat {
		return fmt.Errorf("restore meta snapshot: unknown format %q", env.Format)
	}
	s := env.State
	if s.Nodes == nil {
		s.Nodes = map[string]*model.Node{}
	}
	f.state.Store(&s)
	if f.OnChange != nil {
		f.OnChange(&s)
	}
	return nil
}

const metaSnapshotFormat = "timemachine-meta-v1"

type metaSnapshotEnvelope struct {
	Format string    `json:"format"`
	State  MetaState `json:"state"`
}

type metaSnapshot struct{ s *MetaState }

func (m *metaSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode(metaSnapshotEnvelope{Format: metaSnapshotFormat, State: *m.s}); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist meta snapshot: %w", err)
	}
	return sink.Close()
}

func (m *metaSnapshot) Release() {}
