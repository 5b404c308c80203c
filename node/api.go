package node

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/timemachine-db/timemachine/dht"
	"github.com/timemachine-db/timemachine/model"
	"github.com/timemachine-db/timemachine/raftfsm"
	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/rpc/httpapi"
)

var _ httpapi.Backend = (*Node)(nil)

const retrySoon = time.Second

// apiErr turns an internal error into the API error a client can act on.
func apiErr(err error) error {
	var ae *model.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, errMetaUnavailable):
		return model.Unavailable(retrySoon, "%v; retry shortly", err)
	case errors.Is(err, raftgroup.ErrNotLeader):
		return model.Unavailable(retrySoon, "the slot has no leader right now (an election is in progress); retry shortly")
	case errors.Is(err, raftgroup.ErrUnknownOutcome):
		return model.Unavailable(retrySoon, "the slot's leader changed while the write was in flight, so it may or may not have been applied; retrying the same request is safe")
	case errors.Is(err, raftgroup.ErrClosed):
		return model.Unavailable(retrySoon, "this node is shutting down; send the request to another node")
	case errors.Is(err, raftgroup.ErrOverloaded):
		return model.Overloaded(retrySoon, "the slot's write queue is full; slow down and retry")
	case errors.Is(err, raftfsm.ErrStopped):
		return model.Unavailable(5*time.Second, "the slot stopped after a storage failure on this node; see its log")
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return model.Unavailable(retrySoon, "the request timed out inside the cluster (%v); its outcome is unknown, retrying the same request is safe", err)
	}
	return model.Internal("%v", err)
}

// slotCount is the cluster's slot count.
func (n *Node) slotCount() int {
	if st := n.meta.State(); st.Formed() {
		return st.SlotCount
	}
	return n.id.SlotCount
}

func (n *Node) slotOf(coll, id string) int { return dht.SlotOf(coll, id, n.slotCount()) }

func (n *Node) now() int64 { return n.cfg.Clock().UnixMilli() }

// liveCollection returns a collection that can take jobs.
func (n *Node) liveCollection(ctx context.Context, name string) (*model.Collection, *raftfsm.MetaState, error) {
	st := n.meta.State()
	c, ok := st.Collection(name)
	if !ok {
		// This node's copy of the meta state may trail a change made
		// through another node a moment ago: catch up before saying no.
		var err error
		if st, err = n.catchUpMeta(ctx); err != nil {
			return nil, nil, err
		}
		c, ok = st.Collection(name)
	}
	if !ok {
		return nil, nil, model.NotFound("collection %q does not exist; create it with PUT /v1/collections/%s", name, name)
	}
	if c.Deleting {
		return nil, nil, model.Conflict("collection %q is being deleted; wait for DELETE /v1/collections/%s to finish, then create it again", name, name)
	}
	return c, st, nil
}

// routesKnown reports whether every route the inputs name is known.
func routesKnown(st *raftfsm.MetaState, in []model.JobInput) bool {
	for i := range in {
		if r := in[i].Spec.Route; r != "" && in[i].Err == nil {
			if _, ok := st.Route(r); !ok {
				return false
			}
		}
	}
	return true
}

// errMetaBehind: this node cannot tell whether a collection or route
// exists, because its copy of the meta state is not current (it is
// starting, or cut off from the meta leader). Answering 404 then would be
// a lie a client would act on; 503 makes it retry.
var errMetaBehind = model.Unavailable(retrySoon, "this node is still loading the cluster's configuration (collections, routes); retry shortly")

// catchUpMeta waits (at most two seconds) until this node's meta state has
// applied everything the meta leader had applied when asked, and returns
// it; it fails when that cannot be established.
func (n *Node) catchUpMeta(ctx context.Context) (*raftfsm.MetaState, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := n.meta.WaitCaughtUp(ctx); err != nil {
		return nil, errMetaBehind
	}
	if n.meta.IsLeader() {
		return n.meta.State(), nil
	}
	_, addr := n.meta.Leader()
	if addr == "" {
		return nil, errMetaBehind
	}
	body, err := n.rpc.Call(ctx, addr, mMetaIndex, nil)
	if err != nil || len(body) != 8 {
		return nil, errMetaBehind
	}
	n.meta.WaitApplied(ctx, binary.BigEndian.Uint64(body))
	if ctx.Err() != nil {
		return nil, errMetaBehind
	}
	return n.meta.State(), nil
}

// knownCollection returns a collection (deleting or not), catching up with
// the meta leader before answering that it does not exist.
func (n *Node) knownCollection(ctx context.Context, name string) (*model.Collection, error) {
	if c, ok := n.meta.State().Collection(name); ok {
		return c, nil
	}
	st, err := n.catchUpMeta(ctx)
	if err != nil {
		return nil, err
	}
	if c, ok := st.Collection(name); ok {
		return c, nil
	}
	return nil, model.NotFound("collection %q does not exist", name)
}

func routeMissing(name string) *model.Error {
	return model.NotFound("route %q does not exist; create it with PUT /v1/routes/%s", name, name)
}

// CreateJobs implements httpapi.Backend. Jobs are grouped by slot and each
// slot's group goes to its leader as one proposal; slots commit in parallel.
func (n *Node) CreateJobs(ctx context.Context, coll string, in []model.JobInput) ([]model.JobResult, error) {
	_, st, err := n.liveCollection(ctx, coll)
	if err != nil {
		return nil, err
	}
	if !routesKnown(st, in) {
		if st, err = n.catchUpMeta(ctx); err != nil {
			return nil, err
		}
	}
	out := make([]model.JobResult, len(in))
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
				e := apiErr(err).(*model.Error)
				for _, i := range idx {
					out[i].Err = e
				}
				return
			}
			created := 0
			for k, i := range idx {
				out[i].Code, out[i].Job = res[k].Code, res[k].Job
				if res[k].Code == model.CodeCreated {
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
func (n *Node) UpsertJob(ctx context.Context, coll, id string, spec model.JobSpec, ifMatch uint64) (model.Result, error) {
	_, st, err := n.liveCollection(ctx, coll)
	if err != nil {
		return model.Result{}, err
	}
	if spec.Route != "" {
		if _, ok := st.Route(spec.Route); !ok {
			if st, err = n.catchUpMeta(ctx); err != nil {
				return model.Result{}, err
			}
		}
		if _, ok := st.Route(spec.Route); !ok {
			return model.Result{}, routeMissing(spec.Route)
		}
	}
	res, err := n.proposeSlot(ctx, n.slotOf(coll, id), &raftfsm.Upsert{Coll: coll, ID: id, Spec: spec, IfMatch: ifMatch, Now: n.now()})
	if err != nil {
		return model.Result{}, apiErr(err)
	}
	switch res[0].Code {
	case model.CodePreconditionFailed:
		if res[0].Job == nil {
			return res[0], model.PreconditionFailed("If-Match: %d, but job %q does not exist", ifMatch, id)
		}
		return res[0], model.PreconditionFailed("If-Match: %d, but job %q is at version %d; read it again and retry", ifMatch, id, res[0].Job.Version)
	case model.CodeCreated:
		n.metrics.created.Inc()
	}
	return res[0], nil
}

// GetJob implements httpapi.Backend.
func (n *Node) GetJob(ctx context.Context, coll, id string) (*model.Job, error) {
	if _, err := n.knownCollection(ctx, coll); err != nil {
		return nil, err
	}
	j, ok, err := n.getJob(ctx, n.slotOf(coll, id), coll, id)
	if err != nil {
		return nil, apiErr(err)
	}
	if !ok {
		return nil, model.NotFound("job %q does not exist in collection %q (finished jobs are removed after the collection's retention)", id, coll)
	}
	return j, nil
}

// DeleteJob implements httpapi.Backend.
func (n *Node) DeleteJob(ctx context.Context, coll, id string) error {
	if _, err := n.knownCollection(ctx, coll); err != nil {
		return err
	}
	res, err := n.proposeSlot(ctx, n.slotOf(coll, id), &raftfsm.Delete{Coll: coll, ID: id})
	if err != nil {
		return apiErr(err)
	}
	if res[0].Code == model.CodeNotFound {
		return model.NotFound("job %q does not exist in collection %q", id, coll)
	}
	return nil
}

// ListJobs implements httpapi.Backend: every slot lists its part in order
// and the pages are merged. A slot that stopped early (its page limit or
// scan budget) bounds how far the merged page can go, so the next cursor
// never skips a job.
func (n *Node) ListJobs(ctx context.Context, q model.ListQuery) ([]*model.Job, *model.ListPos, error) {
	if _, err := n.knownCollection(ctx, q.Coll); err != nil {
		return nil, nil, err
	}
	pages := make([]model.ListPage, n.slotCount())
	errs := make([]error, n.slotCount())
	var wg sync.WaitGroup
	for s := 0; s < n.slotCount(); s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			pages[s], errs[s] = n.listSlot(ctx, s, q)
		}(s)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, apiErr(err)
	}
	return mergePages(pages, q.Limit)
}

// mergePages merges per-slot pages (each ordered) into one page.
func mergePages(pages []model.ListPage, limit int) ([]*model.Job, *model.ListPos, error) {
	var bound *model.ListPos
	var all []*model.Job
	for i := range pages {
		p := &pages[i]
		all = append(all, p.Jobs...)
		if p.Stopped && (bound == nil || p.Pos.Less(*bound)) {
			pos := p.Pos
			bound = &pos
		}
	}
	sort.Slice(all, func(i, j int) bool {
		return model.ListPos{Trigger: all[i].TriggerTime, ID: all[i].ID}.Less(model.ListPos{Trigger: all[j].TriggerTime, ID: all[j].ID})
	})
	var out []*model.Job
	for _, j := range all {
		pos := model.ListPos{Trigger: j.TriggerTime, ID: j.ID}
		if bound != nil && bound.Less(pos) {
			break
		}
		if len(out) == limit {
			last := out[len(out)-1]
			return out, &model.ListPos{Trigger: last.TriggerTime, ID: last.ID}, nil
		}
		out = append(out, j)
	}
	if bound != nil {
		return out, bound, nil
	}
	return out, nil, nil
}

// PutCollection implements httpapi.Backend.
func (n *Node) PutCollection(ctx context.Context, c model.Collection) (bool, error) {
	res, err := n.proposeMeta(ctx, &raftfsm.PutCollection{C: c, Now: n.now()})
	if err != nil {
		return false, apiErr(err)
	}
	switch res[0].Code {
	case model.CodeRejected:
		return false, model.Conflict("collection %q is being deleted; wait for the deletion to finish, then create it again", c.Name)
	case model.CodeCreated:
		return true, nil
	}
	return false, nil
}

// GetCollection implements httpapi.Backend.
func (n *Node) GetCollection(ctx context.Context, name string) (*model.Collection, error) {
	c, ok := n.meta.State().Collection(name)
	if !ok {
		st, err := n.catchUpMeta(ctx)
		if err != nil {
			return nil, err
		}
		c, ok = st.Collection(name)
	}
	if !ok {
		return nil, model.NotFound("collection %q does not exist", name)
	}
	return c, nil
}

// ListCollections implements httpapi.Backend.
func (n *Node) ListCollections(ctx context.Context) ([]*model.Collection, error) {
	return n.meta.State().CollectionList(), nil
}

// DeleteCollection implements httpapi.Backend: mark the collection as
// deleting (no new jobs), purge its jobs from every slot, then forget it.
// Each step is idempotent, so a failed deletion is finished by calling
// DELETE again, and a node restart resumes it.
func (n *Node) DeleteCollection(ctx context.Context, name string) error {
	if name == model.DefaultCollection {
		return model.Invalid("the default collection cannot be deleted; delete its jobs instead")
	}
	if _, ok := n.meta.State().Collection(name); !ok {
		return model.NotFound("collection %q does not exist", name)
	}
	res, err := n.proposeMeta(ctx, &raftfsm.MarkCollectionDeleting{Name: name, Now: n.now()})
	if err != nil {
		return apiErr(err)
	}
	if res[0].Code == model.CodeNotFound {
		return model.NotFound("collection %q does not exist", name)
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
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := n.WaitReady(ctx); err != nil || !n.meta.IsLeader() {
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
func (n *Node) PutRoute(ctx context.Context, r model.Route) (bool, error) {
	res, err := n.proposeMeta(ctx, &raftfsm.PutRoute{R: r, Now: n.now()})
	if err != nil {
		return false, apiErr(err)
	}
	return res[0].Code == model.CodeCreated, nil
}

// GetRoute implements httpapi.Backend.
func (n *Node) GetRoute(ctx context.Context, name string) (*model.Route, error) {
	r, ok := n.meta.State().Route(name)
	if !ok {
		st, err := n.catchUpMeta(ctx)
		if err != nil {
			return nil, err
		}
		r, ok = st.Route(name)
	}
	if !ok {
		return nil, model.NotFound("route %q does not exist", name)
	}
	return r, nil
}

// ListRoutes implements httpapi.Backend.
func (n *Node) ListRoutes(ctx context.Context) ([]*model.Route, error) {
	return n.meta.State().RouteList(), nil
}

// DeleteRoute implements httpapi.Backend. Jobs that still name the route
// fail when they fire, with a last_error that says so.
func (n *Node) DeleteRoute(ctx context.Context, name string) error {
	res, err := n.proposeMeta(ctx, &raftfsm.DeleteRoute{Name: name})
	if err != nil {
		return apiErr(err)
	}
	if res[0].Code == model.CodeNotFound {
		return model.NotFound("route %q does not exist", name)
	}
	return nil
}

// Cluster implements httpapi.Backend: the node table and slot table from
// the meta state, and who leads what and which replicas are healthy from
// what every node reports right now.
func (n *Node) Cluster(ctx context.Context) (*model.ClusterInfo, error) {
	st := n.meta.State()
	view := n.cachedView(ctx, 500*time.Millisecond)
	info := &model.ClusterInfo{SlotCount: n.slotCount(), Self: n.id.NodeID, Nodes: []model.NodeInfo{}, Slots: []model.SlotInfo{}}
	info.MetaLeader, _ = n.meta.Leader()
	elig := n.eligible(st)
	info.ReplicationFactor = dht.EffectiveRF(st.ReplicationFactor, len(elig))
	if !st.Formed() {
		info.ReplicationFactor = dht.EffectiveRF(n.cfg.Replicas, 1)
	}
	led, hosted := map[string]int{}, map[string]int{}
	for s := 0; s < n.slotCount(); s++ {
		si := model.SlotInfo{Slot: s, Replicas: []string{}, State: "no_leader"}
		if s < len(st.Slots) {
			si.Replicas = append(si.Replicas, st.Slots[s].Replicas...)
		}
		si.Leader = view.leaderOf(s)
		if si.Leader != "" {
			led[si.Leader]++
			si.State = "healthy"
			ls, _ := view.replica(si.Leader, s)
			si.Pending = ls.Pending
			switch {
			case !sameSet(ls.Voters, si.Replicas):
				si.State = "moving" // membership is changing toward the placement
			default:
				for _, id := range si.Replicas {
					fs, ok := view.replica(id, s)
					if !ok || (id != si.Leader && !raftgroup.CaughtUp(ls.Status, fs.Status)) {
						si.State = "degraded" // a replica is down or behind
					}
				}
			}
		}
		for _, id := range si.Replicas {
			hosted[id]++
		}
		info.Slots = append(info.Slots, si)
	}
	nodes := st.NodeList()
	if len(nodes) == 0 {
		nodes = []*model.Node{{ID: n.id.NodeID, HTTPAddr: n.HTTPAddr(), BindAddr: n.BindAddr(), Status: model.NodeAlive}}
	}
	for _, nd := range nodes {
		status := string(nd.Status)
		if _, ok := view.nodes[nd.ID]; !ok && nd.Status == model.NodeAlive {
			status = "unreachable"
		}
		info.Nodes = append(info.Nodes, model.NodeInfo{ID: nd.ID, HTTPAddr: nd.HTTPAddr, BindAddr: nd.BindAddr, Status: status,
			SlotsLed: led[nd.ID], Replicas: hosted[nd.ID]})
	}
	return info, nil
}

// Ready implements httpapi.Backend: this node is in the cluster (its meta
// state is current) and every slot has a leader somewhere.
func (n *Node) Ready() error {
	if id, _ := n.meta.Leader(); id == "" {
		return errors.New("the meta group has no leader yet (the cluster is forming, or has lost its quorum)")
	}
	if !n.meta.CaughtUp() {
		return errors.New("this node's copy of the meta state is still catching up")
	}
	st := n.meta.State()
	if !st.Formed() {
		return errors.New("the cluster has not formed yet")
	}
	if _, ok := st.Nodes[n.id.NodeID]; !ok {
		return errors.New("this node has not been added to the cluster yet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	view := n.cachedView(ctx, time.Second)
	var missing []string
	for s := 0; s < st.SlotCount; s++ {
		if r := n.replica(s); r != nil && r.IsLeader() {
			continue
		}
		if view.leaderOf(s) == "" {
			missing = append(missing, fmt.Sprint(s))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("slots without a leader: %s", strings.Join(missing, ","))
	}
	return nil
}

// Rebalance implements httpapi.Backend: the fewest replica moves that make
// replica and leader counts even, committed as the new placement (the slot
// leaders then carry them out one membership step at a time).
func (n *Node) Rebalance(ctx context.Context, dryRun bool) ([]model.Move, error) {
	st := n.meta.State()
	if !st.Formed() {
		return nil, model.Unavailable(retrySoon, "the cluster has not formed yet")
	}
	elig := n.eligible(st)
	desired := dht.Rebalance(assignments(st), st.SlotCount, elig, st.ReplicationFactor)
	moves := []model.Move{}
	for _, m := range dht.Diff(assignments(st), desired) {
		moves = append(moves, model.Move{Slot: m.Slot, From: m.From, To: m.To, Kind: "replica"})
	}
	if dryRun {
		return moves, nil
	}
	var ups []raftfsm.SlotUpdate
	for _, a := range desired {
		cur := st.Slots[a.Slot]
		if !sameReplicas(cur.Replicas, a.Replicas) {
			ups = append(ups, raftfsm.SlotUpdate{Slot: a.Slot, Replicas: a.Replicas, ExpectEpoch: cur.Epoch})
		}
	}
	if len(ups) > 0 {
		res, err := n.proposeMeta(ctx, &raftfsm.SetSlots{Updates: ups})
		if err != nil {
			return nil, apiErr(err)
		}
		if res[0].Code == model.CodeStale {
			return nil, model.Conflict("the placement changed while the rebalance was planned; run it again")
		}
	}
	return moves, nil
}

// Compact implements httpapi.Backend: every node snapshots its replicas
// (truncating raft logs) and compacts its storage.
func (n *Node) Compact(ctx context.Context) ([]model.CompactResult, error) {
	st := n.meta.State()
	ids := []string{n.id.NodeID}
	for _, nd := range st.NodeList() {
		if nd.ID != n.id.NodeID && nd.Status == model.NodeAlive {
			ids = append(ids, nd.ID)
		}
	}
	out := make([]model.CompactResult, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func(i int, id string) {
			defer wg.Done()
			if id == n.id.NodeID {
				out[i] = n.compactLocal(ctx)
				return
			}
			cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
			defer cancel()
			body, err := n.rpc.Call(cctx, n.addrOf(id), mCompact, nil)
			if err == nil {
				err = json.Unmarshal(body, &out[i])
			}
			if err != nil {
				out[i] = model.CompactResult{Node: id, Error: err.Error()}
			}
		}(i, id)
	}
	wg.Wait()
	return out, nil
}

// compactLocal snapshots every local replica (which truncates its raft
// log), then compacts the whole Pebble keyspace.
func (n *Node) compactLocal(ctx context.Context) model.CompactResult {
	start := time.Now()
	res := model.CompactResult{Node: n.id.NodeID, OK: true}
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
	return res
}

func (n *Node) knownNode(id string) (*model.Node, error) {
	nd, ok := n.meta.State().Nodes[id]
	if !ok {
		return nil, model.NotFound("node %q is not a member of this cluster (see GET /v1/cluster)", id)
	}
	return nd, nil
}

// TransferSlot implements httpapi.Backend: ask the slot's leader to hand
// leadership to a voter on node `to`.
func (n *Node) TransferSlot(ctx context.Context, s int, to string) error {
	if s < 0 || s >= n.slotCount() {
		return model.NotFound("slot %d does not exist (slots are 0..%d)", s, n.slotCount()-1)
	}
	if _, err := n.knownNode(to); err != nil {
		return err
	}
	st := n.meta.State()
	if s < len(st.Slots) && !st.Slots[s].Has(to) {
		return model.Invalid("node %q holds no replica of slot %d (its replicas: %s)", to, s, strings.Join(st.Slots[s].Replicas, ", "))
	}
	view := n.refreshView(ctx)
	cur := view.leaderOf(s)
	if cur == to {
		return nil
	}
	if cur == "" {
		return model.Unavailable(retrySoon, "slot %d has no leader right now", s)
	}
	body, _ := json.Marshal(transferReq{Slot: s, To: to, Addr: n.addrOf(to)})
	if _, err := n.rpc.Call(ctx, n.addrOf(cur), mTransfer, body); err != nil {
		return apiErr(fmt.Errorf("transfer slot %d from %s to %s: %w", s, cur, to, localErr(err)))
	}
	return nil
}

// DrainNode implements httpapi.Backend: mark the node draining; the
// controller then moves its replicas and leaderships to other nodes.
func (n *Node) DrainNode(ctx context.Context, id string) error {
	nd, err := n.knownNode(id)
	if err != nil {
		return err
	}
	if len(n.eligible(n.meta.State())) <= 1 {
		return model.Invalid("node %q is the only node of the cluster: there is nowhere to move its slots", id)
	}
	x := *nd
	x.Status = model.NodeDraining
	if _, err := n.proposeMeta(ctx, &raftfsm.UpsertNode{N: x, Now: n.now()}); err != nil {
		return apiErr(err)
	}
	return nil
}

// RemoveNode implements httpapi.Backend: forget a node that holds no
// replicas any more (drained, or dead and replaced).
func (n *Node) RemoveNode(ctx context.Context, id string) error {
	if _, err := n.knownNode(id); err != nil {
		return err
	}
	st := n.meta.State()
	var held []string
	for s, e := range st.Slots {
		if e.Has(id) {
			held = append(held, fmt.Sprint(s))
		}
	}
	if len(held) > 0 {
		return model.Conflict("node %q still holds replicas of slots %s; drain it first (POST /v1/admin/nodes/%s/drain) or wait until a dead node's replicas are re-created", id, strings.Join(held, ","), id)
	}
	if id == n.id.NodeID && len(st.Nodes) == 1 {
		return model.Invalid("node %q is the only node of the cluster and cannot be removed", id)
	}
	if _, err := n.proposeMeta(ctx, &raftfsm.RemoveNode{ID: id}); err != nil {
		return apiErr(err)
	}
	if n.serf != nil {
		_ = n.serf.RemoveFailedNode(id)
	}
	return nil
}
