package node

import (
	"github.com/prometheus/client_golang/prometheus"
)

// pipelineCollector reports pipelined delivery (routes with "pipeline")
// at scrape time from the webhook client's counters: whether writes carry
// many requests (requests ÷ writes), and how often a connection ended
// under requests still owed an answer — sent again when the receiver
// cannot have seen them, failed (and retried as a connection error) when
// it may have. A receiver that does not answer pipelined requests shows
// as a climbing broken count.
type pipelineCollector struct{ n *Node }

var (
	pipeConnsDesc    = prometheus.NewDesc("timemachine_callback_pipeline_connections", "Pipelined callback connections open now.", nil, nil)
	pipeOpenedDesc   = prometheus.NewDesc("timemachine_callback_pipeline_connections_opened_total", "Pipelined callback connections opened.", nil, nil)
	pipeWritesDesc   = prometheus.NewDesc("timemachine_callback_pipeline_writes_total", "Writes on pipelined callback connections, each carrying one or more requests.", nil, nil)
	pipeRequestsDesc = prometheus.NewDesc("timemachine_callback_pipeline_requests_total", "Callback requests written on pipelined connections (a request sent again counts again).", nil, nil)
	pipeResentDesc   = prometheus.NewDesc("timemachine_callback_pipeline_resent_total", "Pipelined callbacks sent again on another connection because the receiver cannot have seen them (a Connection: close answer before them, a stale connection); no attempt counted.", nil, nil)
	pipeBrokenDesc   = prometheus.NewDesc("timemachine_callback_pipeline_broken_total", "Pipelined callbacks failed because their connection broke before their answer; retried as a connection error.", nil, nil)
)

func (c *pipelineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{pipeConnsDesc, pipeOpenedDesc, pipeWritesDesc, pipeRequestsDesc, pipeResentDesc, pipeBrokenDesc} {
		ch <- d
	}
}

func (c *pipelineCollector) Collect(ch chan<- prometheus.Metric) {
	if c.n.webhook == nil {
		return
	}
	s := c.n.webhook.PipelineStats()
	ch <- prometheus.MustNewConstMetric(pipeConnsDesc, prometheus.GaugeValue, float64(s.Connections))
	ch <- prometheus.MustNewConstMetric(pipeOpenedDesc, prometheus.CounterValue, float64(s.Opened))
	ch <- prometheus.MustNewConstMetric(pipeWritesDesc, prometheus.CounterValue, float64(s.Writes))
	ch <- prometheus.MustNewConstMetric(pipeRequestsDesc, prometheus.CounterValue, float64(s.Requests))
	ch <- prometheus.MustNewConstMetric(pipeResentDesc, prometheus.CounterValue, float64(s.Resent))
	ch <- prometheus.MustNewConstMetric(pipeBrokenDesc, prometheus.CounterValue, float64(s.Broken))
}
