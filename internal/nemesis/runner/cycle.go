package runner

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/timemachine-db/timemachine/internal/nemesis/cluster"
	"github.com/timemachine-db/timemachine/internal/nemesis/fault"
	"github.com/timemachine-db/timemachine/internal/nemesis/history"
	"github.com/timemachine-db/timemachine/internal/nemesis/netfault"
	"github.com/timemachine-db/timemachine/internal/nemesis/workload"
)

// active is a fault in force: how to heal it, and what to measure.
type active struct {
	desc    string
	targets []*cluster.Node
	heal    func() error
	// probe: measure how long until every slot the victim led is
	// writable through the others.
	victim      *cluster.Node
	led         []int
	via         []*cluster.Node
	target      time.Duration
	skipped     string // why the fault did not run ("" it did)
	unsupported bool   // ... because this build cannot do it at all
	// isolates: the targets are cut off from the others (history.Fault).
	isolates bool
}

// faultStart records the start of a fault window.
func (r *run) faultStart(cycle int, kind string, planned bool, targets []*cluster.Node, detail string) history.Fault {
	r.mu.Lock()
	r.faultID++
	id := r.faultID
	r.mu.Unlock()
	f := history.Fault{ID: id, Cycle: cycle, Kind: kind, Planned: planned, Targets: ids(targets), Detail: detail,
		Start: r.clock.Now(), End: history.Never}
	r.rec.Fault(f)
	return f
}

func (r *run) faultEnd(f history.Fault) {
	f.End = r.clock.Now()
	r.rec.Fault(f)
}

// slowRecovery is the recovery time over which a cycle prints why the
// cluster was not healthy meanwhile (Cluster.WaitHealthyTrace).
const slowRecovery = 3 * time.Second

// cycle runs one step of the schedule: the fault, held for its time, its
// healing, and the wait for a healthy cluster.
func (r *run) cycle(ctx context.Context, s fault.Step) history.Cycle {
	c := history.Cycle{N: s.Cycle, Fault: string(s.Kind), Detail: s.String(), Start: r.clock.Now()}
	head := fmt.Sprintf("cycle %3d/%d  %-18s", s.Cycle, r.cfg.Cycles, s.Kind)
	if why, ok := r.unsupported(s.Kind); ok {
		r.printf("%s skipped: %s", head, why)
		c.Recovered, c.Problem, c.End = true, "skipped: "+why, r.clock.Now()
		return c
	}
	var desc string
	if s.Kind == fault.Membership {
		desc, c.Violations = r.membership(ctx, s)
	} else {
		desc = r.hold(ctx, s)
	}
	for _, v := range c.Violations {
		desc += "; VIOLATION: " + v
	}
	healed := time.Now()
	d, trace, err := r.cl.WaitHealthyTrace(ctx, r.cfg.SettleTimeout)
	c.End = r.clock.Now()
	if d > slowRecovery || err != nil {
		// Why it took long: each reason the cluster was not healthy, as
		// it first appeared.
		for _, t := range trace {
			r.printf("    not healthy %s", t)
		}
	}
	c.RecoveryNs = int64(d)
	if err != nil {
		c.Problem = err.Error()
		r.printf("%s %s; NOT healthy %v after healing: %v", head, desc, r.cfg.SettleTimeout, err)
		return c
	}
	c.Recovered = true
	r.printf("%s %s; healthy %v after healing", head, desc, time.Since(healed).Round(10*time.Millisecond))
	sleepCtx(ctx, 500*time.Millisecond)
	return c
}

// hold applies a fault, holds it for its duration (measuring failover
// meanwhile), and heals it. It returns what happened, in words.
func (r *run) hold(ctx context.Context, s fault.Step) string {
	if s.Kind == fault.None {
		// No fault and no window: whatever shows here is the workload's.
		sleepCtx(ctx, s.Hold)
		return fmt.Sprintf("no fault for %v", s.Hold.Round(10*time.Millisecond))
	}
	if why, ok := r.unsupported(s.Kind); ok {
		// The fault under a membership change may be one this run cannot
		// inject (a network fault without namespaces): the change then
		// runs on a healthy cluster, for the fault's time.
		sleepCtx(ctx, s.Hold)
		return "skipped: " + why
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	ci, _, err := r.cl.AnyInfo(rctx)
	cancel()
	if err != nil {
		return "not applied: " + err.Error()
	}
	f := r.faultStart(s.Cycle, string(s.Kind), s.Kind.Planned(), nil, s.String())
	a := r.apply(ctx, s, ci)
	if a.skipped != "" {
		f.End = r.clock.Now()
		r.rec.Fault(f)
		if a.unsupported {
			// The build cannot do it: skip every later cycle of this kind.
			r.mu.Lock()
			r.meta.Unsupported[string(s.Kind)] = a.skipped
			r.mu.Unlock()
			r.saveMeta()
		}
		return "skipped: " + a.skipped
	}
	f.Targets, f.Isolates = ids(a.targets), a.isolates
	r.rec.Fault(f)
	var fo *history.Failover
	var wg sync.WaitGroup
	if len(a.led) > 0 && len(a.via) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := r.probe(ctx, s.Cycle, string(s.Kind), a.victim, a.led, a.via, f.Start, a.target)
			fo = &m
		}()
	}
	sleepCtx(ctx, s.Hold)
	herr := a.heal()
	healed := r.clock.Now()
	r.faultEnd(f)
	wg.Wait()
	if fo != nil {
		fo.HealedNs = healed.Mono - f.Start.Mono
	}
	desc := a.desc
	if fo != nil {
		r.rec.Failover(*fo)
		if fo.All >= 0 {
			desc += fmt.Sprintf("; its %d slots writable again after %v", len(a.led), time.Duration(fo.All).Round(time.Millisecond))
		} else {
			desc += fmt.Sprintf("; some of its %d slots NOT writable within %v", len(a.led), probeTimeout)
		}
	}
	if herr != nil {
		desc += "; healing: " + herr.Error()
	}
	return desc
}

// apply starts the fault of step s given the cluster's state ci.
func (r *run) apply(ctx context.Context, s fault.Step, ci cluster.Info) active {
	members := r.cl.Members()
	up := r.cl.Up()
	byID := map[string]*cluster.Node{}
	for _, n := range members {
		byID[n.ID] = n
	}
	rank := ci.RankByLeadership(ids(members)) // most slots first; ties by index
	most, least := byID[rank[0]], byID[rank[len(rank)-1]]
	others := func(x *cluster.Node) []*cluster.Node {
		var out []*cluster.Node
		for _, n := range up {
			if n != x {
				out = append(out, n)
			}
		}
		return out
	}
	hold := s.Hold.Round(10 * time.Millisecond)
	switch s.Kind {
	case fault.KillOne, fault.KillLeader:
		v := most
		if s.Kind == fault.KillOne {
			v = byID[fault.Pick(s.Pick, sortedIDs(members))]
		}
		err := v.Kill()
		return active{desc: fmt.Sprintf("kill -9 %s (led %d), restarted after %v", v.ID, len(ci.LedBy(v.ID)), hold),
			targets: []*cluster.Node{v}, heal: v.Start, victim: v, led: ci.LedBy(v.ID), via: others(v),
			target: r.cfg.FailoverTarget, skipped: errString(err), isolates: true}
	case fault.Wipe:
		v := byID[fault.Pick(s.Pick, sortedIDs(members))]
		err := v.Kill()
		if err == nil {
			var join []string
			for _, n := range others(v) {
				join = append(join, n.SerfAddr)
			}
			err = v.Wipe(join)
		}
		return active{desc: fmt.Sprintf("kill -9 %s (led %d), its data directory deleted, restarted empty after %v", v.ID, len(ci.LedBy(v.ID)), hold),
			targets: []*cluster.Node{v}, heal: v.Start, victim: v, led: ci.LedBy(v.ID), via: others(v),
			target: r.cfg.FailoverTarget, skipped: errString(err), isolates: true}
	case fault.KillAll:
		for _, n := range members {
			_ = n.Kill()
		}
		return active{desc: fmt.Sprintf("kill -9 all of %s, restarted after %v", joinIDs(members), hold), targets: members,
			heal: func() error {
				var errs []error
				for _, n := range members {
					errs = append(errs, n.Start())
				}
				return errors.Join(errs...)
			}}
	case fault.PauseLeader, fault.PauseFollower:
		v := most
		if s.Kind == fault.PauseFollower {
			v = least
		}
		err := v.Pause()
		return active{desc: fmt.Sprintf("SIGSTOP %s (led %d) for %v", v.ID, len(ci.LedBy(v.ID)), hold),
			targets: []*cluster.Node{v}, heal: v.Resume, victim: v, led: ci.LedBy(v.ID), via: others(v),
			target: r.cfg.FailoverTarget, skipped: errString(err), isolates: true}
	case fault.Term:
		v := most
		start := time.Now()
		code, err := v.Terminate(30 * time.Second)
		desc := fmt.Sprintf("SIGTERM %s (led %d): exit %d after %v, restarted %v later", v.ID, len(ci.LedBy(v.ID)), code,
			time.Since(start).Round(time.Millisecond), hold)
		if err != nil {
			desc += " (" + err.Error() + ")"
		}
		return active{desc: desc, targets: []*cluster.Node{v}, heal: v.Start}
	case fault.PartitionOne, fault.PartitionMajority, fault.PartitionRing:
		var links []fault.Link
		var desc string
		var a active
		switch s.Kind {
		case fault.PartitionOne:
			links = fault.Isolate(most.ID, sortedIDs(members))
			desc = fmt.Sprintf("cut %s (led %d) off for %v", most.ID, len(ci.LedBy(most.ID)), hold)
			a = active{targets: []*cluster.Node{most}, victim: most, led: ci.LedBy(most.ID), via: others(most), target: r.cfg.PartitionTarget, isolates: true}
		case fault.PartitionMajority:
			var minority []string
			links, minority = fault.MajoritySplit(s.Pick, sortedIDs(members))
			desc = fmt.Sprintf("split %v from the rest for %v", minority, hold)
			a.isolates = true
			for _, id := range minority {
				a.targets = append(a.targets, byID[id])
			}
		default:
			var order []string
			links, order = fault.Ring(s.Pick, sortedIDs(members))
			desc = fmt.Sprintf("ring %v (cut %d links) for %v", order, len(links), hold)
			a.targets = members
		}
		err := r.topo.Partition(r.pairs(links, byID))
		a.desc, a.heal, a.skipped = desc, r.topo.Heal, errString(err)
		return a
	case fault.Loss:
		err := r.topo.SetLoss(s.Loss)
		return active{desc: fmt.Sprintf("%.0f%% packet loss between nodes for %v", s.Loss*100, hold), targets: members,
			heal: r.topo.Heal, skipped: errString(err)}
	case fault.Delay:
		if s.AllLinks {
			r.topo.SetDelay(nil, s.Delay)
			return active{desc: fmt.Sprintf("%v delay on every raft/RPC link for %v", s.Delay, hold), targets: members, heal: r.topo.Heal}
		}
		v := byID[fault.Pick(s.Pick, sortedIDs(members))]
		r.topo.SetDelay([]int{v.Index}, s.Delay)
		return active{desc: fmt.Sprintf("%v delay on %s's raft/RPC links for %v", s.Delay, v.ID, hold), targets: []*cluster.Node{v}, heal: r.topo.Heal}
	case fault.Clock:
		if !r.clock0 {
			return active{skipped: "not supported by this build (no --debug-faults flag)", unsupported: true}
		}
		v := most
		if err := r.setClock(ctx, v, s.Offset); err != nil {
			return active{skipped: err.Error(), unsupported: errors.Is(err, errNoClockHook)}
		}
		return active{desc: fmt.Sprintf("clock of %s (led %d) offset %+v for %v", v.ID, len(ci.LedBy(v.ID)), s.Offset, hold),
			targets: []*cluster.Node{v}, heal: func() error { return r.setClock(context.WithoutCancel(ctx), v, 0) }}
	}
	return active{skipped: "unknown fault " + string(s.Kind)}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (r *run) pairs(links []fault.Link, byID map[string]*cluster.Node) []netfault.Pair {
	var out []netfault.Pair
	for _, l := range links {
		out = append(out, netfault.MakePair(byID[l[0]].Index, byID[l[1]].Index))
	}
	return out
}

// errNoClockHook: the build has no clock hook.
var errNoClockHook = errors.New("not supported by this build (POST /v1/debug/clock: 404)")

// setClock sets a node's clock offset through the server's debug hook
// (POST /v1/debug/clock {"offset":"2s"} → 204).
func (r *run) setClock(ctx context.Context, n *cluster.Node, offset time.Duration) error {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, b, err := r.cl.Do(rctx, n, "POST", "/v1/debug/clock", map[string]string{"offset": offset.String()})
	switch {
	case err != nil:
		return fmt.Errorf("POST /v1/debug/clock via %s: %w", n.ID, err)
	case st == http.StatusNotFound:
		return errNoClockHook
	case st != http.StatusNoContent:
		return fmt.Errorf("POST /v1/debug/clock via %s: %d %s", n.ID, st, strings.TrimSpace(string(b)))
	}
	return nil
}

// probe measures, from at, how long until a create in each of slots is
// acknowledged through one of via (round robin, a try every 50 ms, each
// try bounded by 1 s). The probe jobs are part of the history.
func (r *run) probe(ctx context.Context, cycle int, kind string, victim *cluster.Node, slots []int, via []*cluster.Node, at history.Stamp, target time.Duration) history.Failover {
	fo := history.Failover{Cycle: cycle, Fault: kind, Victim: victim.ID, At: at, TargetNs: int64(target)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	nslots := r.cl.Config().Slots
	for _, s := range slots {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			id := cluster.IDInSlot(coll, fmt.Sprintf("probe%d-s%d", cycle, s), s, nslots)
			trigger := time.Now().Add(2 * time.Second).UnixMilli()
			after := int64(-1)
			deadline := time.Now().Add(probeTimeout)
			for k := 0; time.Now().Before(deadline) && ctx.Err() == nil; k++ {
				n := via[k%len(via)]
				res := r.wl.CreateOnce(ctx, probeTryTimeout, 100+s, id, trigger, workload.Endpoint{ID: n.ID, HTTPAddr: n.HTTPAddr})
				if res.Outcome == history.OK && (res.Status == http.StatusCreated || res.Status == http.StatusOK) {
					after = r.clock.Now().Mono - at.Mono
					break
				}
				sleepCtx(ctx, 50*time.Millisecond)
			}
			mu.Lock()
			fo.Probes = append(fo.Probes, history.SlotProbe{Slot: s, After: after})
			mu.Unlock()
		}(s)
	}
	wg.Wait()
	sort.Slice(fo.Probes, func(i, j int) bool { return fo.Probes[i].Slot < fo.Probes[j].Slot })
	for _, p := range fo.Probes {
		if p.After < 0 {
			fo.All = -1
			break
		}
		fo.All = max(fo.All, p.After)
	}
	return fo
}
