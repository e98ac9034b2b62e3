package metrics_test

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/axsched/ax"
	"github.com/axsched/ax/metrics"
)

func ExampleNew() {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		panic(err)
	}
	// The scheduler calls Observe once m is its Config.Observer; here, by hand.
	m.Observe(ax.Event{Kind: ax.EventStarted, Name: "order.close.timeout", Lateness: 4 * time.Millisecond})
	m.Observe(ax.Event{Kind: ax.EventFinished, Name: "order.close.timeout", Outcome: ax.OutcomeFailed, Duration: 30 * time.Millisecond})
	m.Observe(ax.Event{Kind: ax.EventFinished, Name: "order.close.timeout", Outcome: ax.OutcomeSucceeded, Duration: 20 * time.Millisecond})

	fams, err := reg.Gather() // sorted by name, series by label values
	if err != nil {
		panic(err)
	}
	for _, f := range fams {
		switch f.GetName() {
		case "ax_task_executions_total":
			for _, s := range f.GetMetric() {
				if v := s.GetCounter().GetValue(); v > 0 {
					fmt.Printf("%s{outcome=%q} %g\n", f.GetName(), s.GetLabel()[1].GetValue(), v)
				}
			}
		case "ax_task_lateness_seconds":
			h := f.GetMetric()[0].GetHistogram()
			fmt.Printf("%s count=%d sum=%g\n", f.GetName(), h.GetSampleCount(), h.GetSampleSum())
		case "ax_early_starts_total":
			fmt.Printf("%s %g\n", f.GetName(), f.GetMetric()[0].GetCounter().GetValue())
		}
	}
	// Output:
	// ax_early_starts_total 0
	// ax_task_executions_total{outcome="failed"} 1
	// ax_task_executions_total{outcome="succeeded"} 1
	// ax_task_lateness_seconds count=1 sum=0.004
}
