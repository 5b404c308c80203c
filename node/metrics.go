package node

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/timemachine-db/timemachine/raftgroup"
	"github.com/timemachine-db/timemachine/slot"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// metrics is the node's Prometheus registry. Counters are bumped on the hot
// paths (one atomic add each); per-slot gauges are read at scrape time.
type metrics struct {
	reg         *prometheus.Registry
	created     prometheus.Counter
	fired       prometheus.Counter
	firstFires  prometheus.Counter
	outcomes    *prometheus.CounterVec
	lateness    prometheus.Histogram
	applyTime   prometheus.Histogram
	httpReqs    *prometheus.CounterVec
	httpLatency *prometheus.HistogramVec
	elections   *prometheus.CounterVec
	leaderMoves *prometheus.CounterVec
	routeLate   *prometheus.HistogramVec
	routeHeld   *prometheus.CounterVec
}

func newMetrics(n *Node) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.created = prometheus.NewCounter(prometheus.CounterOpts{Name: "timemachine_jobs_created_total", Help: "Jobs created on this node's slot leaders."})
	m.fired = prometheus.NewCounter(prometheus.CounterOpts{Name: "timemachine_jobs_fired_total", Help: "Callback attempts started (first attempts and retries)."})
	m.firstFires = prometheus.NewCounter(prometheus.CounterOpts{Name: "timemachine_jobs_fired_first_total", Help: "First callback attempts started."})
	m.outcomes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "timemachine_job_attempt_outcomes_total", Help: "Callback attempts by what they did to the job: succeeded, failed, retried, rescheduled."}, []string{"outcome"})
	m.lateness = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "timemachine_fire_lateness_seconds",
		Help:    "How long after its due time a callback attempt started.",
		Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	})
	m.applyTime = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "timemachine_raft_apply_seconds",
		Help:    "Time for a raft entry to commit and apply on a slot leader.",
		Buckets: []float64{.0001, .00025, .0005, .001, .002, .005, .01, .025, .05, .1, .25, 1},
	})
	m.httpReqs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "timemachine_http_requests_total", Help: "HTTP API requests by route and status."}, []string{"route", "code"})
	m.httpLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "timemachine_http_request_seconds", Help: "HTTP API latency by route.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}, []string{"route"})
	m.elections = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "timemachine_raft_elections_total",
		Help: "Elections this node's replicas started (pre-vote included), by group: a slot number or \"meta\"."}, []string{"group"})
	m.leaderMoves = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "timemachine_raft_leader_changes_total",
		Help: "Leader changes this node's replicas saw (elections won by someone else, transfers), by group: a slot number or \"meta\"."}, []string{"group"})
	m.routeLate = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "timemachine_route_fire_lateness_seconds",
		Help:    "How long after its due time a first attempt to a route with delivery control started (rate limits and in-flight caps show here), by route.",
		Buckets: []float64{.001, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
	}, []string{"route"})
	m.routeHeld = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "timemachine_route_held_back_total",
		Help: "Jobs that waited for their route's rate limit or in-flight cap, by route."}, []string{"route"})
	for _, o := range []string{"succeeded", "failed", "retried", "rescheduled"} {
		m.outcomes.WithLabelValues(o)
	}
	m.reg.MustRegister(m.created, m.fired, m.firstFires, m.outcomes, m.lateness, m.applyTime, m.httpReqs, m.httpLatency, m.elections, m.leaderMoves, m.routeLate, m.routeHeld, &laneCollector{n: n},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&slotCollector{n: n}, &securityCollector{n: n}, &clockCollector{n: n}, &pipelineCollector{n: n})
	return m
}

func (m *metrics) handler() fasthttp.RequestHandler {
	return fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
}

// slot.LaneMetrics.

func (m *metrics) RouteLateness(route string) func(time.Duration) {
	o := m.routeLate.WithLabelValues(route)
	return func(d time.Duration) { o.Observe(d.Seconds()) }
}

func (m *metrics) HeldBack(route string) { m.routeHeld.WithLabelValues(route).Inc() }

// laneCollector reports the jobs waiting in each route's lane at scrape
// time.
type laneCollector struct{ n *Node }

var heldBackDesc = prometheus.NewDesc("timemachine_route_held_back_jobs",
	"Due jobs of a route waiting on this node for its rate limit, in-flight cap or batch, by route.", []string{"route"}, nil)

var (
	placesHeldDesc = prometheus.NewDesc("timemachine_route_places_held",
		"In-flight places of a route capped below the node count that the meta leader counts as held (reported by the meta leader only), by route.", []string{"route"}, nil)
	placesWaitingDesc = prometheus.NewDesc("timemachine_route_places_waiting",
		"Requests of a route capped below the node count waiting on the meta leader for a place (reported by the meta leader only), by route.", []string{"route"}, nil)
)

func (c *laneCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- heldBackDesc
	ch <- placesHeldDesc
	ch <- placesWaitingDesc
}

func (c *laneCollector) Collect(ch chan<- prometheus.Metric) {
	if c.n.lanes != nil {
		for route, n := range c.n.lanes.HeldBack() {
			ch <- prometheus.MustNewConstMetric(heldBackDesc, prometheus.GaugeValue, float64(n), route)
		}
	}
	if c.n.places != nil {
		for route, st := range c.n.places.Stats() {
			ch <- prometheus.MustNewConstMetric(placesHeldDesc, prometheus.GaugeValue, float64(st.Held), route)
			ch <- prometheus.MustNewConstMetric(placesWaitingDesc, prometheus.GaugeValue, float64(st.Waiting), route)
		}
	}
}

// slot.Metrics.

func (m *metrics) Fired(_ int, lateness time.Duration, attempt int64) {
	m.fired.Inc()
	if attempt == 1 {
		m.firstFires.Inc()
		m.lateness.Observe(lateness.Seconds())
	}
}

func (m *metrics) Decided(_ int, v slot.Verdict) { m.outcomes.WithLabelValues(v.String()).Inc() }

func (m *metrics) Applied(_ int, d time.Duration) { m.applyTime.Observe(d.Seconds()) }

func (m *metrics) RaftEvent(s int, e raftgroup.Event) { m.raftEvent(strconv.Itoa(s), e) }

func (m *metrics) raftEvent(group string, e raftgroup.Event) {
	switch e {
	case raftgroup.EventElection:
		m.elections.WithLabelValues(group).Inc()
	case raftgroup.EventLeaderChange:
		m.leaderMoves.WithLabelValues(group).Inc()
	}
}

func (m *metrics) observeHTTP(route string, status int, d time.Duration) {
	m.httpReqs.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.httpLatency.WithLabelValues(route).Observe(d.Seconds())
}

// slotCollector reports per-slot state at scrape time.
type slotCollector struct{ n *Node }

var (
	pendingDesc = prometheus.NewDesc("timemachine_pending_jobs", "Scheduled jobs per slot hosted on this node.", []string{"slot", "role"}, nil)
	leaderDesc  = prometheus.NewDesc("timemachine_slot_leader", "1 when this node leads the slot.", []string{"slot"}, nil)
	appliedDesc = prometheus.NewDesc("timemachine_slot_applied_index", "Last raft index applied by this node's replica.", []string{"slot"}, nil)
	diskDesc    = prometheus.NewDesc("timemachine_storage_disk_bytes", "Bytes on disk used by the node's Pebble store.", nil, nil)
	raftDesc    = prometheus.NewDesc("timemachine_raft_snapshot_bytes", "Bytes on disk of raft snapshots, per slot replica.", []string{"slot"}, nil)
	l0Desc      = prometheus.NewDesc("timemachine_storage_l0_files", "Files in level 0 of the Pebble LSM (a long queue means compactions are behind).", nil, nil)
	readAmpDesc = prometheus.NewDesc("timemachine_storage_read_amplification", "Pebble read amplification: sorted runs a point read may consult.", nil, nil)
	logDesc     = prometheus.NewDesc("timemachine_raft_log_bytes", "Bytes on disk of the node's shared slot raft log file.", nil, nil)
	leadersDesc = prometheus.NewDesc("timemachine_slot_leaders", "Slots this node leads.", nil, nil)
	lagDesc     = prometheus.NewDesc("timemachine_follower_lag_entries",
		"For the slots this node leads: how many entries each reachable follower is behind the leader's commit index.", []string{"slot", "follower"}, nil)
	unreachDesc = prometheus.NewDesc("timemachine_follower_unreachable",
		"For the slots this node leads: 1 for a follower in the configuration that does not answer.", []string{"slot", "follower"}, nil)
	movesPendingDesc = prometheus.NewDesc("timemachine_moves_pending", "Slots whose replicas are moving (reported by the meta leader).", nil, nil)
	movesActiveDesc  = prometheus.NewDesc("timemachine_moves_in_progress", "Moving slots being worked on now (at most --move-concurrency; meta leader).", nil, nil)
	movesDoneDesc    = prometheus.NewDesc("timemachine_moves_done_total", "Slot moves finished while this node led the meta group.", nil, nil)
	nodesDesc        = prometheus.NewDesc("timemachine_cluster_nodes", "Nodes of the cluster by status, as /v1/cluster shows them.", []string{"status"}, nil)
)

func (c *slotCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pendingDesc
	ch <- leaderDesc
	ch <- appliedDesc
	ch <- diskDesc
	ch <- raftDesc
	ch <- logDesc
	ch <- l0Desc
	ch <- readAmpDesc
	ch <- leadersDesc
	ch <- lagDesc
	ch <- unreachDesc
	ch <- movesPendingDesc
	ch <- movesActiveDesc
	ch <- movesDoneDesc
	ch <- nodesDesc
}

func (c *slotCollector) Collect(ch chan<- prometheus.Metric) {
	leaders := 0
	defer func() { ch <- prometheus.MustNewConstMetric(leadersDesc, prometheus.GaugeValue, float64(leaders)) }()
	c.collectCluster(ch)
	for _, r := range c.n.slots.All() {
		st := r.Stats()
		s := strconv.Itoa(st.Slot)
		role, lead := "follower", 0.0
		if r.IsLeader() {
			role, lead = "leader", 1
			leaders++
		}
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(st.Pending), s, role)
		ch <- prometheus.MustNewConstMetric(leaderDesc, prometheus.GaugeValue, lead, s)
		ch <- prometheus.MustNewConstMetric(appliedDesc, prometheus.GaugeValue, float64(st.Applied), s)
		ch <- prometheus.MustNewConstMetric(raftDesc, prometheus.GaugeValue, float64(r.RaftBytes()), s)
	}
	st := c.n.db.Stats()
	ch <- prometheus.MustNewConstMetric(diskDesc, prometheus.GaugeValue, float64(st.DiskBytes))
	ch <- prometheus.MustNewConstMetric(l0Desc, prometheus.GaugeValue, float64(st.L0Files))
	ch <- prometheus.MustNewConstMetric(readAmpDesc, prometheus.GaugeValue, float64(st.ReadAmp))
	ch <- prometheus.MustNewConstMetric(logDesc, prometheus.GaugeValue, float64(c.n.logDB.Size()))
}

// collectCluster reports follower lag, moves and node counts.
func (c *slotCollector) collectCluster(ch chan<- prometheus.Metric) {
	if c.n.cluster == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	m := c.n.cluster.Measure(ctx)
	for _, f := range m.Followers {
		s := strconv.Itoa(f.Slot)
		unreach := 0.0
		if f.Reachable {
			ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(f.Behind), s, f.Follower)
		} else {
			unreach = 1
		}
		ch <- prometheus.MustNewConstMetric(unreachDesc, prometheus.GaugeValue, unreach, s, f.Follower)
	}
	ch <- prometheus.MustNewConstMetric(movesPendingDesc, prometheus.GaugeValue, float64(m.MovesPending))
	ch <- prometheus.MustNewConstMetric(movesActiveDesc, prometheus.GaugeValue, float64(m.MovesActive))
	ch <- prometheus.MustNewConstMetric(movesDoneDesc, prometheus.CounterValue, float64(m.MovesDone))
	for _, st := range []string{"alive", "draining", "failed", "left", "unreachable"} {
		ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(m.Nodes[st]), st)
	}
}
