package demo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/axsched/ax/metrics"
)

// metricsServer serves the scheduler's Prometheus metrics (package metrics) at
// /metrics while the demo runs: `ax demo --metrics ADDR`.
type metricsServer struct {
	obs  *metrics.Observer // the scheduler's Config.Observer
	url  string            // where /metrics is served, with the port actually bound
	srv  *http.Server
	done chan error // Serve's result
}

// metricsStatsInterval is the scheduler's Config.StatsInterval when metrics are
// served: how often ax_tasks and ax_queue_lag_seconds are refreshed.
const metricsStatsInterval = time.Second

// metricsShutdownTimeout bounds the wait for scrapes in flight when the demo ends.
const metricsShutdownTimeout = 2 * time.Second

// serveMetrics listens on addr (HOST:PORT; port 0 picks a free one) and serves, at
// /metrics, an Observer's metrics on a registry of their own.
func serveMetrics(addr string) (*metricsServer, error) {
	reg := prometheus.NewRegistry()
	obs, err := metrics.New(reg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m := &metricsServer{
		obs:  obs,
		url:  "http://" + ln.Addr().String() + "/metrics",
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		done: make(chan error, 1),
	}
	go func() { m.done <- m.srv.Serve(ln) }()
	return m, nil
}

// close stops serving: it waits up to metricsShutdownTimeout for scrapes in flight,
// then closes their connections.
func (m *metricsServer) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), metricsShutdownTimeout)
	defer cancel()
	err := m.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, m.srv.Close())
	}
	if serr := <-m.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("stop serving metrics: %w", err)
	}
	return nil
}
