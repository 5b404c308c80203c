package runner

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/timemachine-db/timemachine/internal/nemesis/cluster"
	"github.com/timemachine-db/timemachine/internal/nemesis/fault"
)

const (
	removeTimeout = 30 * time.Second
	joinTimeout   = 60 * time.Second
	moveTimeout   = 90 * time.Second
	pollInterval  = 200 * time.Millisecond
)

// membership runs the membership changes during another fault (s.Under,
// held for its own duration in the meantime): add a node, rebalance onto
// it, drain an old member, stop it and remove it. Each change is a planned
// fault window of its own.
func (r *run) membership(ctx context.Context, s fault.Step) (string, []string) {
	var underDesc string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		underDesc = r.hold(ctx, *s.Under)
	}()
	sleepCtx(ctx, 500*time.Millisecond) // the fault is in force
	var steps, violations []string
	err := r.changeMembers(ctx, s, &steps, &violations)
	if err != nil {
		steps = append(steps, "FAILED: "+err.Error())
	}
	wg.Wait()
	return fmt.Sprintf("during [%s]: %s", underDesc, strings.Join(steps, ", ")), violations
}

func (r *run) changeMembers(ctx context.Context, s fault.Step, steps, violations *[]string) error {
	// Add a node, joined through a member that is up.
	up := r.cl.Up()
	if len(up) == 0 {
		return fmt.Errorf("no member is up")
	}
	var join []string
	for _, n := range up {
		join = append(join, n.SerfAddr)
	}
	f := r.faultStart(s.Cycle, "add-node", true, nil, "")
	start := time.Now()
	n, err := r.cl.AddNode(0, join)
	if err != nil {
		r.faultEnd(f)
		return fmt.Errorf("add a node: %w", err)
	}
	r.mu.Lock()
	r.meta.NodeAddrs[n.ID] = n.Host
	r.mu.Unlock()
	r.saveMeta()
	f.Targets = []string{n.ID}
	if err := n.Start(); err != nil {
		r.faultEnd(f)
		return err
	}
	err = r.waitInfo(ctx, joinTimeout, func(ci cluster.Info) error {
		if in, ok := ci.Node(n.ID); !ok || in.Status != "alive" {
			return fmt.Errorf("%s not alive in /v1/cluster", n.ID)
		}
		return nil
	})
	r.faultEnd(f)
	if err != nil {
		return fmt.Errorf("%s joining: %w", n.ID, err)
	}
	*steps = append(*steps, fmt.Sprintf("%s joined in %v", n.ID, time.Since(start).Round(10*time.Millisecond)))

	// Rebalance onto it.
	f = r.faultStart(s.Cycle, "rebalance", true, []*cluster.Node{n}, "")
	start = time.Now()
	err = r.admin(ctx, "POST", "/v1/admin/rebalance", nil)
	if err == nil {
		err = r.waitInfo(ctx, moveTimeout, func(ci cluster.Info) error {
			if ci.ReplicasOn(n.ID) == 0 {
				return fmt.Errorf("no replica on %s yet", n.ID)
			}
			return settled(ci)
		})
	}
	r.faultEnd(f)
	if err != nil {
		return fmt.Errorf("rebalance: %w", err)
	}
	*steps = append(*steps, fmt.Sprintf("rebalanced in %v", time.Since(start).Round(10*time.Millisecond)))

	// Drain an old member that the fault under way does not touch, then
	// stop and remove it.
	var candidates []string
	for _, m := range r.cl.Up() {
		if m != n {
			candidates = append(candidates, m.ID)
		}
	}
	if len(candidates) == 0 {
		return fmt.Errorf("no member to drain")
	}
	v := r.cl.ByID(fault.Pick(s.Pick, candidates))
	f = r.faultStart(s.Cycle, "drain", true, []*cluster.Node{v}, "")
	start = time.Now()
	err = r.admin(ctx, "POST", "/v1/admin/nodes/"+v.ID+"/drain", nil)
	if err == nil {
		err = r.waitInfo(ctx, moveTimeout, func(ci cluster.Info) error {
			if k := ci.ReplicasOn(v.ID); k > 0 {
				return fmt.Errorf("%s still holds %d replicas", v.ID, k)
			}
			return settled(ci)
		})
	}
	r.faultEnd(f)
	if err != nil {
		return fmt.Errorf("drain %s: %w", v.ID, err)
	}
	*steps = append(*steps, fmt.Sprintf("%s drained in %v", v.ID, time.Since(start).Round(10*time.Millisecond)))

	f = r.faultStart(s.Cycle, "remove-node", true, []*cluster.Node{v}, "")
	code, terr := v.Terminate(30 * time.Second)
	err = r.admin(ctx, "DELETE", "/v1/admin/nodes/"+v.ID, nil)
	r.faultEnd(f)
	if err == nil {
		v.MarkRemoved()
		// "It then disappears from /v1/cluster" (API.md §5): on every
		// member.
		if werr := r.waitEvery(ctx, removeTimeout, func(ci cluster.Info) error {
			if in, ok := ci.Node(v.ID); ok {
				return fmt.Errorf("%s still listed as %s", v.ID, in.Status)
			}
			return nil
		}); werr != nil {
			*violations = append(*violations, fmt.Sprintf("removed node %s: %v", v.ID, werr))
		}
	}
	if terr != nil {
		*steps = append(*steps, fmt.Sprintf("SIGTERM %s: %v", v.ID, terr))
	}
	if err != nil {
		if !v.Removed() && !v.Running() {
			_ = v.Start() // not removed: it stays a member
		}
		return fmt.Errorf("remove %s: %w", v.ID, err)
	}
	*steps = append(*steps, fmt.Sprintf("%s stopped (exit %d) and removed", v.ID, code))
	return nil
}

// settled: no slot moving and every slot led.
func settled(ci cluster.Info) error {
	for _, s := range ci.Slots {
		if s.State == "moving" || s.Leader == "" {
			return fmt.Errorf("slot %d is %s (leader %q)", s.Slot, s.State, s.Leader)
		}
	}
	return nil
}

// admin sends an admin request to the first up member that answers.
func (r *run) admin(ctx context.Context, method, path string, body any) error {
	var last error
	for _, n := range r.cl.Up() {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, b, err := r.cl.Do(rctx, n, method, path, body)
		cancel()
		switch {
		case err != nil:
			last = err
			continue
		case st == http.StatusServiceUnavailable:
			last = fmt.Errorf("%s %s via %s: %d %s", method, path, n.ID, st, strings.TrimSpace(string(b)))
			continue
		case st >= 300:
			return fmt.Errorf("%s %s via %s: %d %s", method, path, n.ID, st, strings.TrimSpace(string(b)))
		}
		return nil
	}
	return last
}

// waitInfo polls /v1/cluster (from any up member) until cond holds.
func (r *run) waitInfo(ctx context.Context, timeout time.Duration, cond func(cluster.Info) error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		ci, _, err := r.cl.AnyInfo(rctx)
		cancel()
		if err == nil {
			err = cond(ci)
		}
		if err == nil {
			return nil
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", timeout, last)
		}
		sleepCtx(ctx, pollInterval)
	}
	return ctx.Err()
}

// waitEvery polls /v1/cluster on every up member until cond holds on all
// of them.
func (r *run) waitEvery(ctx context.Context, timeout time.Duration, cond func(cluster.Info) error) error {
	deadline := time.Now().Add(timeout)
	for ctx.Err() == nil {
		var last error
		for _, n := range r.cl.Up() {
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			ci, err := r.cl.Info(rctx, n)
			cancel()
			if err == nil {
				err = cond(ci)
			}
			if err != nil {
				last = fmt.Errorf("via %s: %w", n.ID, err)
				break
			}
		}
		if last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", timeout, last)
		}
		sleepCtx(ctx, pollInterval)
	}
	return ctx.Err()
}
