package demo

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/axsched/ax/metrics"
)

// metricsServer serves the scheduler's Prometheus metrics (package metrics) at
// /metrics while the demo runs: `ax demo --metrics ADDR`.
type metricsServer struct {
	*localServer
	obs *metrics.Observer // the scheduler's Config.Observer
	url string            // where /metrics is served, with the port actually bound
}

// metricsStatsInterval is the scheduler's Config.StatsInterval when metrics are
// served: how often ax_tasks and ax_queue_lag_seconds are refreshed.
const metricsStatsInterval = time.Second

// serveMetrics listens on addr (HOST:PORT; port 0 picks a free one) and serves, at
// /metrics, an Observer's metrics on a registry of their own.
func serveMetrics(addr string) (*metricsServer, error) {
	reg := prometheus.NewRegistry()
	obs, err := metrics.New(reg)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	l, err := listenAndServe(addr, mux, "metrics")
	if err != nil {
		return nil, err
	}
	return &metricsServer{localServer: l, obs: obs, url: "http://" + l.addr + "/metrics"}, nil
}

// close stops serving: it waits a little for scrapes in flight.
func (m *metricsServer) close() error { return m.stop("metrics", nil) }
