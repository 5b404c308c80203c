package node

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/timemachine-db/timemachine/dht"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/rpc/httpapi"
	"github.com/timemachine-db/timemachine/slot"
)

var _ httpapi.Backend = (*Node)(nil)

const retrySoon = time.Second

// apiErr turns an internal error into the API error a client can act on.
func apiErr(err error) error {
	var ae *httpapi.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, slot.ErrNotLeader):
		return httpapi.Unavailable(retrySoon, "the slot has no leader right now (an election is in progress); retry shortly")
	case errors.Is(err, slot.ErrUnknownOutcome):
		return httpapi.Unavailable(retrySoon, "the slot's leader changed while the write was in flight, so it may or may not have been applied; retrying the same request is safe")
	case errors.Is(err, slot.ErrClosed):
		return httpapi.Unavailable(retrySoon, "this node is shutting down; send the request to another node")
	case errors.Is(err, slot.ErrOverloaded):
		return httpapi.Overloaded(retrySoon, "the slot's write queue is full; slow down and retry")
	case errors.Is(err, raftfsm.ErrStopped):
		return httpapi.Unavailable(5*time.Second, "the slot stopped after a storage failure on this node; see its log")
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return httpapi.Unavailable(retrySoon, "the request timed out inside the cluster (%v); its outcome is unknown, retrying the same request is safe", err)
	}
	return httpapi.Internal("%v", err)
}

func (n *Node) slotCount() int { return n.id.SlotCount }

func (n *Node) slotOf(coll, id string) int { return dht.SlotOf(coll, id, n.slotCount()) }

// replica returns the local replica of a slot.
func (n *Node) replica(s int) *slot.Replica {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if s < 0 || s >= len(n.slots) {
		return nil
	}
	return n.slots[s]
}

// leaderOf returns the local replica of a slot if it leads the slot.
func (n *Node) leaderOf(s int) (*slot.Replica, error) {
	r := n.replica(s)
	if r == nil || !r.IsLeader() {
		return nil, slot.ErrNotLeader
	}
	return r, nil
}

// proposeSlot commits commands on a slot's leader.
func (n *Node) proposeSlot(ctx context.Context, s int, cmds ...raftfsm.Command) ([]raftfsm.Result, error) {
	r, err := n.leaderOf(s)
	if err != nil {
		return nil, err
	}
	return r.Propose(ctx, cmds...)
}

// proposeMeta commits commands on the meta leader.
func (n *Node) proposeMeta(ctx context.Context, cmds ...raftfsm.Command) ([]raftfsm.Result, error) {
	return n.meta.Propose(ctx, cmds...)
}

// readSlot returns a replica to read a slot from: its leader, so a read
// sees every acknowledged write.
func (n *Node) readSlot(s int) (*slot.Replica, error) { return n.leaderOf(s) }

func (n *Node) now() int64 { return n.cfg.Clock().UnixMilli() }

// liveCollection returns a collection that can take jobs.
func (n *Node) liveCollection(name string) (*raftfsm.Collection, *raftfsm.MetaState, error) {
	st := n.meta.State()
	c, ok := st.Collection(name)
	if !ok {
		return nil, nil, httpapi.NotFound("collection %q does not exist; create it with PUT /v1/collections/%s", name, name)
	}
	if c.Deleting {
		return nil, nil, httpapi.Conflict("collection %q is being deleted; wait for DELETE /v1/collections/%s to finish, then create it again", name, name)
	}
	return c, st, nil
}

func routeMissing(name string) *httpapi.Error {
	return httpapi.NotFound("route %q does not exist; create it with PUT /v1/routes/%s", name, name)
}

// CreateJobs implements httpapi.Backend. Jobs are grouped by slot and each
// slot's group goes to its leader as one proposal; slots commit in parallel.
func (n *Node) CreateJobs(ctx context.Context, coll string, in []httpapi.JobInput) ([]httpapi.JobResult, error) {
	_, st, err := n.liveCollection(coll)
	if err != nil {
		return nil, err
	}
	out := make([]httpapi.JobResult, len(in))
	now := n.now()
	bySlot := map[int][]int{}
	for i := range in {
		x := &in[i]
		out[i].ID = x.ID
		if x.Err != nil {
			out[i].Err = x.Err
			continue
		}
		if x.Spec.Route != "" {
			if _, ok := st.Route(x.Spec.Route); !ok {
				out[i].Err = routeMissing(x.Spec.Route)
				continue
			}
		}
		s := n.slotOf(coll, x.ID)
		bySlot[s] = append(bySlot[s], i)
	}
	var wg sync.WaitGroup
	for s, idx := range bySlot {
		wg.Add(1)
		go func(s int, idx []int) {
			defer wg.Done()
			cmds := make([]raftfsm.Command, len(idx))
			for k, i := range idx {
				cmds[k] = &raftfsm.Create{Coll: coll, ID: in[i].ID, Spec: in[i].Spec, Now: now}
			}
			res, err := n.proposeSlot(ctx, s, cmds...)
			if err != nil {
				e := apiErr(err).(*httpapi.Error)
				for _, i := range idx {
					out[i].Err = e
				}
				return
			}
			created := 0
			for k, i := range idx {
				out[i].Code, out[i].Job = res[k].Code, res[k].Job
				if res[k].Code == raftfsm.Created {
					created++
				}
			}
			n.metrics.created.Add(float64(created))
		}(s, idx)
	}
	wg.Wait()
	return out, nil
}

// UpsertJob implements httpapi.Backend.
func (n *Node) UpsertJob(ctx context.Context, coll, id string, spec raftfsm.JobSpec, ifMatch uint64) (raftfsm.Result, error) {
	_, st, err := n.liveCollection(coll)
	if err != nil {
		return raftfsm.Result{}, err
	}
	if spec.Route != "" {
		if _, ok := st.Route(spec.Route); !ok {
			return raftfsm.Result{}, routeMissing(spec.Route)
		}
	}
	res, err := n.proposeSlot(ctx, n.slotOf(coll, id), &raftfsm.Upsert{Coll: coll, ID: id, Spec: spec, IfMatch: ifMatch, Now: n.now()})
	if err != nil {
		return raftfsm.Result{}, apiErr(err)
	}
	switch res[0].Code {
	case raftfsm.PreconditionFailed:
		if res[0].Job == nil {
			return res[0], httpapi.PreconditionFailed("If-Match: %d, but job %q does not exist", ifMatch, id)
		}
		return res[0], httpapi.PreconditionFailed("If-Match: %d, but job %q is at version %d; read it again and retry", ifMatch, id, res[0].Job.Version)
	case raftfsm.Created:
		n.metrics.created.Inc()
	}
	return res[0], nil
}

// GetJob implements httpapi.Backend.
func (n *Node) GetJob(ctx context.Context, coll, id string) (*raftfsm.Job, error) {
	if _, ok := n.meta.State().Collection(coll); !ok {
		return nil, httpapi.NotFound("collection %q does not exist", coll)
	}
	r, err := n.readSlot(n.slotOf(coll, id))
	if err != nil {
		return nil, apiErr(err)
	}
	j, ok, err := r.Get(coll, id)
	if err != nil {
		return nil, apiErr(err)
	}
	if !ok {
		return nil, httpapi.NotFound("job %q does not exist in collection %q (finished jobs are removed after the collection's retention)", id, coll)
	}
	return j, nil
}

// DeleteJob implements httpapi.Backend.
func (n *Node) DeleteJob(ctx context.Context, coll, id string) error {
	if _, ok := n.meta.State().Collection(coll); !ok {
		return httpapi.NotFound("collection %q does not exist", coll)
	}
	res, err := n.proposeSlot(ctx, n.slotOf(coll, id), &raftfsm.Delete{Coll: coll, ID: id})
	if err != nil {
		return apiErr(err)
	}
	if res[0].Code == raftfsm.NotFound {
		return httpapi.NotFound("job %q does not exist in collection %q", id, coll)
	}
	return nil
}

// ListJobs implements httpapi.Backend: every slot lists its part in order
// and the pages are merged. A slot that stopped early (its page limit or
// scan budget) bounds how far the merged page can go, so the next cursor
// never skips a job.
func (n *Node) ListJobs(ctx context.Context, q raftfsm.ListQuery) ([]*raftfsm.Job, *raftfsm.ListPos, error) {
	if _, ok := n.meta.State().Collection(q.Coll); !ok {
		return nil, nil, httpapi.NotFound("collection %q does not exist", q.Coll)
	}
	pages := make([]raftfsm.ListPage, n.slotCount())
	errs := make([]error, n.slotCount())
	var wg sync.WaitGroup
	for s := 0; s < n.slotCount(); s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			r, err := n.readSlot(s)
			if err != nil {
				errs[s] = err
				return
			}
			pages[s], errs[s] = r.List(q)
		}(s)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, apiErr(err)
	}
	return mergePages(pages, q.Limit)
}

// mergePages merges per-slot pages (each ordered) into one page.
func mergePages(pages []raftfsm.ListPage, limit int) ([]*raftfsm.Job, *raftfsm.ListPos, error) {
	var bound *raftfsm.ListPos
	var all []*raftfsm.Job
	for i := range pages {
		p := &pages[i]
		all = append(all, p.Jobs...)
		if p.Stopped && (bound == nil || p.Pos.Less(*bound)) {
			pos := p.Pos
			bound = &pos
		}
	}
	sort.Slice(all, func(i, j int) bool {
		return raftfsm.ListPos{Trigger: all[i].TriggerTime, ID: all[i].ID}.Less(raftfsm.ListPos{Trigger: all[j].TriggerTime, ID: all[j].ID})
	})
	var out []*raftfsm.Job
	for _, j := range all {
		pos := raftfsm.ListPos{Trigger: j.TriggerTime, ID: j.ID}
		if bound != nil && bound.Less(pos) {
			break
		}
		if len(out) == limit {
			last := out[len(out)-1]
			return out, &raftfsm.ListPos{Trigger: last.TriggerTime, ID: last.ID}, nil
		}
		out = append(out, j)
	}
	if bound != nil {
		return out, bound, nil
	}
	return out, nil, nil
}

// PutCollection implements httpapi.Backend.
func (n *Node) PutCollection(ctx context.Context, c raftfsm.Collection) (bool, error) {
	res, err := n.proposeMeta(ctx, &raftfsm.PutCollection{C: c, Now: n.now()})
	if err != nil {
		return false, apiErr(err)
	}
	switch res[0].Code {
	case raftfsm.Rejected:
		return false, httpapi.Conflict("collection %q is being deleted; wait for the deletion to finish, then create it again", c.Name)
	case raftfsm.Created:
		return true, nil
	}
	return false, nil
}

// GetCollection implements httpapi.Backend.
func (n *Node) GetCollection(ctx context.Context, name string) (*raftfsm.Collection, error) {
	c, ok := n.meta.State().Collection(name)
	if !ok {
		return nil, httpapi.NotFound("collection %q does not exist", name)
	}
	return c, nil
}

// ListCollections implements httpapi.Backend.
func (n *Node) ListCollections(ctx context.Context) ([]*raftfsm.Collection, error) {
	return n.meta.State().CollectionList(), nil
}

// DeleteCollection implements httpapi.Backend: mark the collection as
// deleting (no new jobs), purge its jobs from every slot, then forget it.
// Each step is idempotent, so a failed deletion is finished by calling
// DELETE again, and a node restart resumes it.
func (n *Node) DeleteCollection(ctx context.Context, name string) error {
	if name == raftfsm.DefaultCollection {
		return httpapi.Invalid("the default collection cannot be deleted; delete its jobs instead")
	}
	if _, ok := n.meta.State().Collection(name); !ok {
		return httpapi.NotFound("collection %q does not exist", name)
	}
	res, err := n.proposeMeta(ctx, &raftfsm.MarkCollectionDeleting{Name: name, Now: n.now()})
	if err != nil {
		return apiErr(err)
	}
	if res[0].Code == raftfsm.NotFound {
		return httpapi.NotFound("collection %q does not exist", name)
	}
	return n.finishDeletion(ctx, name)
}

func (n *Node) finishDeletion(ctx context.Context, name string) error {
	var wg sync.WaitGroup
	errs := make([]error, n.slotCount())
	for s := 0; s < n.slotCount(); s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			for {
				res, err := n.proposeSlot(ctx, s, &raftfsm.PurgeCollection{Coll: name, Limit: 5000})
				if err != nil {
					errs[s] = err
					return
				}
				if !res[0].More {
					return
				}
			}
		}(s)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return apiErr(fmt.Errorf("purging collection %q (retry the DELETE to finish it): %w", name, err))
	}
	if _, err := n.proposeMeta(ctx, &raftfsm.ForgetCollection{Name: name}); err != nil {
		return apiErr(err)
	}
	return nil
}

// resumeDeletions finishes collection deletions that a restart cut short.
func (n *Node) resumeDeletions() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		return
	}
	for _, c := range n.meta.State().CollectionList() {
		if !c.Deleting {
			continue
		}
		n.log.Info("resuming deletion of collection", "collection", c.Name)
		if err := n.finishDeletion(ctx, c.Name); err != nil {
			n.log.Warn("resuming collection deletion failed; retry DELETE /v1/collections/"+c.Name, "error", err)
		}
	}
}

// PutRoute implements httpapi.Backend.
func (n *Node) PutRoute(ctx context.Context, r raftfsm.Route) (bool, error) {
	res, err := n.proposeMeta(ctx, &raftfsm.PutRoute{R: r, Now: n.now()})
	if err != nil {
		return false, apiErr(err)
	}
	return res[0].Code == raftfsm.Created, nil
}

// GetRoute implements httpapi.Backend.
func (n *Node) GetRoute(ctx context.Context, name string) (*raftfsm.Route, error) {
	r, ok := n.meta.State().Route(name)
	if !ok {
		return nil, httpapi.NotFound("route %q does not exist", name)
	}
	return r, nil
}

// ListRoutes implements httpapi.Backend.
func (n *Node) ListRoutes(ctx context.Context) ([]*raftfsm.Route, error) {
	return n.meta.State().RouteList(), nil
}

// DeleteRoute implements httpapi.Backend. Jobs that still name the route
// fail when they fire, with a last_error that says so.
func (n *Node) DeleteRoute(ctx context.Context, name string) error {
	res, err := n.proposeMeta(ctx, &raftfsm.DeleteRoute{Name: name})
	if err != nil {
		return apiErr(err)
	}
	if res[0].Code == raftfsm.NotFound {
		return httpapi.NotFound("route %q does not exist", name)
	}
	return nil
}

// Cluster implements httpapi.Backend.
func (n *Node) Cluster(ctx context.Context) (*httpapi.ClusterInfo, error) {
	info := &httpapi.ClusterInfo{SlotCount: n.slotCount(), ReplicationFactor: 1, Self: n.id.NodeID}
	info.MetaLeader, _ = n.meta.Leader()
	led, hosted := 0, 0
	for s := 0; s < n.slotCount(); s++ {
		si := httpapi.SlotInfo{Slot: s, State: "no_leader", Replicas: []string{}}
		if r := n.replica(s); r != nil {
			st := r.Stats()
			hosted++
			si.Leader, si.Replicas, si.Pending = st.Leader, append(st.Voters, st.Nonvoters...), st.Pending
			if si.Replicas == nil {
				si.Replicas = []string{}
			}
			if st.Leader != "" {
				si.State = "healthy"
			}
			if st.Leader == n.id.NodeID {
				led++
			}
		}
		info.Slots = append(info.Slots, si)
	}
	info.Nodes = []httpapi.NodeInfo{{ID: n.id.NodeID, HTTPAddr: n.HTTPAddr(), BindAddr: n.mux.Addr().String(), Status: "alive", SlotsLed: led, Replicas: hosted}}
	return info, nil
}

// Ready implements httpapi.Backend.
func (n *Node) Ready() error {
	if id, _ := n.meta.Leader(); id == "" {
		return errors.New("the meta group has no leader yet")
	}
	if !n.meta.CaughtUp() {
		return errors.New("the meta group's state is still being replayed")
	}
	var missing []string
	for s := 0; s < n.slotCount(); s++ {
		r := n.replica(s)
		if r == nil {
			missing = append(missing, fmt.Sprint(s))
			continue
		}
		if id, _ := r.Leader(); id == "" {
			missing = append(missing, fmt.Sprint(s))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("slots without a leader: %s", strings.Join(missing, ","))
	}
	return nil
}

// Rebalance implements httpapi.Backend. One node holds every slot: there
// is nothing to move.
func (n *Node) Rebalance(ctx context.Context, dryRun bool) ([]httpapi.Move, error) {
	return []httpapi.Move{}, nil
}

// Compact implements httpapi.Backend: snapshot every local replica (which
// truncates its raft log), then compact the whole Pebble keyspace.
func (n *Node) Compact(ctx context.Context) ([]httpapi.CompactResult, error) {
	start := time.Now()
	res := httpapi.CompactResult{Node: n.id.NodeID, OK: true}
	var errs []error
	for _, r := range n.localReplicas() {
		if err := r.Snapshot(); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Snapshot++
	}
	if err := n.db.Compact(ctx, []byte{0}, []byte{0xff, 0xff}); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		res.OK, res.Error = false, err.Error()
	}
	res.Took = time.Since(start)
	res.TookMs = res.Took.Milliseconds()
	return []httpapi.CompactResult{res}, nil
}

func (n *Node) knownNode(id string) error {
	if id != n.id.NodeID {
		return httpapi.NotFound("node %q is not a member of this cluster", id)
	}
	return nil
}

// TransferSlot implements httpapi.Backend.
func (n *Node) TransferSlot(ctx context.Context, s int, to string) error {
	if s < 0 || s >= n.slotCount() {
		return httpapi.NotFound("slot %d does not exist (slots are 0..%d)", s, n.slotCount()-1)
	}
	if err := n.knownNode(to); err != nil {
		return err
	}
	return nil // the only node already leads every slot
}

// DrainNode implements httpapi.Backend.
func (n *Node) DrainNode(ctx context.Context, id string) error {
	if err := n.knownNode(id); err != nil {
		return err
	}
	return httpapi.Invalid("node %q is the only node of the cluster: there is nowhere to move its slots", id)
}

// RemoveNode implements httpapi.Backend.
func (n *Node) RemoveNode(ctx context.Context, id string) error {
	if err := n.knownNode(id); err != nil {
		return err
	}
	return httpapi.Invalid("node %q is the only node of the cluster and cannot be removed", id)
}
