package node

import (
	"github.com/prometheus/client_golang/prometheus"
)

// securityCollector reports the refusals of the security layer at scrape
// time: callbacks the egress policy refused, internal-port connections
// refused (no or a foreign certificate, junk), and the API's connections
// (open now, turned away at a cap).
type securityCollector struct{ n *Node }

var (
	callbackRefusedDesc = prometheus.NewDesc("timemachine_callback_refused_total", "Callback attempts refused by the egress policy (--callback-deny/--callback-allow).", nil, nil)
	peerRefusedDesc     = prometheus.NewDesc("timemachine_internal_connections_refused_total", "Connections to the internal port refused before any raft or RPC byte was read, by reason (tls, header, route, busy).", []string{"reason"}, nil)
	httpOpenDesc        = prometheus.NewDesc("timemachine_http_connections_open", "HTTP API connections open now.", nil, nil)
	httpCapDesc         = prometheus.NewDesc("timemachine_http_connections_max", "The cap on open HTTP API connections (--max-conns).", nil, nil)
	httpRefusedDesc     = prometheus.NewDesc("timemachine_http_connections_refused_total", "HTTP API connections turned away at a cap: --max-conns (503) or --max-conns-per-ip (429).", nil, nil)
)

func (c *securityCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- callbackRefusedDesc
	ch <- peerRefusedDesc
	ch <- httpOpenDesc
	ch <- httpCapDesc
	ch <- httpRefusedDesc
}

func (c *securityCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	if n.sec != nil && n.sec.egress != nil {
		ch <- prometheus.MustNewConstMetric(callbackRefusedDesc, prometheus.CounterValue, float64(n.sec.egress.Refused()))
	}
	if n.mux != nil {
		for reason, v := range n.mux.Refused() {
			ch <- prometheus.MustNewConstMetric(peerRefusedDesc, prometheus.CounterValue, float64(v), reason)
		}
	}
	if n.api != nil {
		ch <- prometheus.MustNewConstMetric(httpOpenDesc, prometheus.GaugeValue, float64(n.api.OpenConns()))
		ch <- prometheus.MustNewConstMetric(httpRefusedDesc, prometheus.CounterValue, float64(n.api.RefusedConns()))
	}
	ch <- prometheus.MustNewConstMetric(httpCapDesc, prometheus.GaugeValue, float64(n.cfg.MaxConns))
}
