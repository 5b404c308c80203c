package e2e

// The soak: kill -9 / restart cycles against a 3-node cluster under a
// steady workload. Long, so skipped unless TIMEMACHINE_SOAK is set
// (scripts/soak.sh, `make soak`).
//
//	TIMEMACHINE_SOAK=1                 run it
//	TIMEMACHINE_SOAK_CYCLES=20         kill -9 / restart cycles (default 20)
//	TIMEMACHINE_SOAK_SEED=<n>          the PRNG seed (default: from the clock; always logged)
//	TIMEMACHINE_E2E_LOGDIR=<dir>       keep the node logs there

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, v)
	}
	return n
}

// soakCycle is what one kill -9 / restart cycle measured.
type soakCycle struct {
	N           int
	Victim      string
	Led         []int
	F           failover
	Down        time.Duration // kill → restart
	Ready       time.Duration // restart → /readyz 200 on the restarted node
	Healthy     time.Duration // ready → every slot healthy with 3 replicas
	AckedBefore int
}

// TestSoak: a steady stream of creates through every node (~150 jobs/s,
// triggers 0.5–4 s ahead, callbacks to the test's receiver) while, cycle
// after cycle, the node leading the most slots is killed with SIGKILL,
// kept down for a random 0.5–5 s (seeded), restarted on its data, and the
// cluster is waited on until all three are ready and every slot healthy.
// At the end: every acknowledged job delivered at least once, none early,
// repeats only with the same Idempotency-Key.
func TestSoak(t *testing.T) {
	if os.Getenv("TIMEMACHINE_SOAK") == "" {
		t.Skip("the soak runs only with TIMEMACHINE_SOAK set (scripts/soak.sh, make soak)")
	}
	cycles := envInt(t, "TIMEMACHINE_SOAK_CYCLES", 20)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("TIMEMACHINE_SOAK_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("TIMEMACHINE_SOAK_SEED=%q: want an unsigned integer", v)
		}
		seed = s
	}
	t.Logf("soak: %d cycles, seed %d (TIMEMACHINE_SOAK_SEED=%d repeats the choices)", cycles, seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x50a4))
	start := time.Now()

	c := startCluster(t)
	c.waitCluster(settleTimeout, "balanced", c.allIdx(), checkBalanced(c.IDs))
	rcv := newReceiver(t)
	coll := c.newCollection(t, 0, "soak")
	w := newWorkload(c, rcv, coll)

	stop := make(chan struct{})
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		w.stream(streamConfig{prefix: "s", tick: 100 * time.Millisecond, batch: 13, singles: 2,
			minLead: 500 * time.Millisecond, maxLead: 4 * time.Second, seed: seed}, stop)
	}()
	stopStream := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-streamDone
	}
	defer stopStream()
	time.Sleep(2 * time.Second) // a steady state first

	var stats []soakCycle
	for k := 1; k <= cycles; k++ {
		// The node leading the most slots (ties: rotate).
		ci := c.mustInfo(k % 3)
		victim, most := -1, -1
		for j := 0; j < 3; j++ {
			i := (k + j) % 3
			if n := len(ci.ledBy(c.IDs[i])); n > most {
				victim, most = i, n
			}
		}
		vid := c.IDs[victim]
		cs := soakCycle{N: k, Victim: vid, Led: ci.ledBy(vid)}
		_, acked, _, _, _ := w.snapshot()
		cs.AckedBefore = len(acked)
		down := 500*time.Millisecond + time.Duration(rng.Int64N(int64(4500*time.Millisecond)))

		if err := c.Nodes[victim].Kill(); err != nil {
			t.Fatalf("cycle %d: kill -9 %s: %v", k, vid, err)
		}
		killAt := time.Now()
		cs.F = measureFailover(c, w, victim, cs.Led, killAt, fmt.Sprintf("probe%d", k), 2*failoverBound)
		if cs.F.LedErr != nil {
			t.Errorf("cycle %d: after kill -9 of %s the slots did not all get a leader in %v: %v", k, vid, 2*failoverBound, cs.F.LedErr)
		}
		if cs.F.AllWritable < 0 {
			t.Errorf("cycle %d: creates in some slot %s led were not acknowledged within %v: %s", k, vid, 2*failoverBound, probeString(cs.F.Probes))
		}
		time.Sleep(time.Until(killAt.Add(down)))
		cs.Down = time.Since(killAt)

		restartAt := time.Now()
		if err := c.Nodes[victim].Restart(); err != nil {
			t.Errorf("cycle %d: restart %s: %v", k, vid, err)
			break
		}
		cs.Ready = time.Since(restartAt)
		d, err := c.pollCluster(settleTimeout, c.allIdx(), checkHealthy(c.IDs))
		cs.Healthy = d
		if err != nil {
			t.Errorf("cycle %d: not healthy %v after the restart of %s: %v", k, settleTimeout, vid, err)
			break
		}
		c.waitAllReady(readyTimeout)
		stats = append(stats, cs)
		t.Logf("cycle %2d: kill -9 %s (led %v, %d acked so far): every slot led again %v, first write %v, all its slots writable %v; down %v; ready %v after restart, healthy %v later",
			k, vid, cs.Led, cs.AckedBefore, cs.F.LedAgain.Round(time.Millisecond), cs.F.FirstWrite.Round(time.Millisecond),
			cs.F.AllWritable.Round(time.Millisecond), cs.Down.Round(time.Millisecond), cs.Ready.Round(time.Millisecond), cs.Healthy.Round(time.Millisecond))
		if t.Failed() {
			break
		}
	}

	stopStream()
	_, acked, failures, _, lastTrig := w.snapshot()
	t.Logf("creating stopped after %v: %d acknowledged; retried answers: %v; gave up on %d", time.Since(start).Round(time.Second), len(acked), failures, w.gaveUp.Load())
	if g := w.gaveUp.Load(); g > 0 {
		t.Errorf("%d creates were never acknowledged in %v of retrying", g, w.retryFor)
	}
	w.waitDelivered(time.UnixMilli(lastTrig).Add(massLateBound+waitSlack+10*time.Second), 2*time.Second)
	rep := w.check()

	// The report.
	var b strings.Builder
	fmt.Fprintf(&b, "soak report (seed %d, %d of %d cycles, %v):\n", seed, len(stats), cycles, time.Since(start).Round(time.Second))
	fmt.Fprintf(&b, "  %s\n", rep)
	fmt.Fprintf(&b, "  cycle victim led-slots  led-again first-write all-writable   down  ready healthy\n")
	var ledAgain, allWritable []time.Duration
	for _, cs := range stats {
		fmt.Fprintf(&b, "  %5d %6s %9d %10v %11v %12v %6v %6v %7v\n", cs.N, cs.Victim, len(cs.Led),
			cs.F.LedAgain.Round(time.Millisecond), cs.F.FirstWrite.Round(time.Millisecond), cs.F.AllWritable.Round(time.Millisecond),
			cs.Down.Round(100*time.Millisecond), cs.Ready.Round(10*time.Millisecond), cs.Healthy.Round(100*time.Millisecond))
		ledAgain = append(ledAgain, cs.F.LedAgain)
		allWritable = append(allWritable, cs.F.AllWritable)
	}
	fmt.Fprintf(&b, "  kill→every slot led again: %s\n", spread(ledAgain))
	fmt.Fprintf(&b, "  kill→all the victim's slots writable: %s", spread(allWritable))
	t.Log(b.String())
	w.verify(t, rep)
}

// spread renders min / median / max of ds.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no data"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("min %v, median %v, max %v", s[0].Round(time.Millisecond), s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}
