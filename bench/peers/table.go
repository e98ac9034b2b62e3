package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
)

func numCPU() int { return runtime.NumCPU() }

// series is one metric of one workload on one backend, over runs.
type series struct {
	workload, metric, unit, backend string
	higher                          bool
	values                          []float64
}

// table collects series in the order they first appear.
type table struct {
	order []string
	rows  map[string]*series
	ax    map[string]string // workload+metric -> key of ax's series
}

func newTable() *table { return &table{rows: map[string]*series{}, ax: map[string]string{}} }

// add records one run's metrics; w.label's rows are shown under enqueue-batch.
func (t *table) add(w workload, label, backend string, ms []metric) {
	wl := w.name
	if w.label != nil {
		wl = strings.TrimSuffix(wl, "-copy")
	}
	for _, m := range ms {
		key := wl + "\x00" + m.Name + "\x00" + label
		s, ok := t.rows[key]
		if !ok {
			s = &series{workload: wl, metric: m.Name, unit: m.Unit, backend: label, higher: m.Higher}
			t.rows[key] = s
			t.order = append(t.order, key)
		}
		s.values = append(s.values, m.Value)
		if backend == "ax" {
			t.ax[wl+"\x00"+m.Name] = key
		}
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

func format(v float64, unit string) string {
	switch {
	case unit == "ms" || unit == "ms/s":
		return fmt.Sprintf("%.1f", v)
	case unit == "cmd/s" && v < 100:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

func formatMetrics(ms []metric) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = fmt.Sprintf("%s=%s %s", m.Name, format(m.Value, m.Unit), m.Unit)
	}
	return strings.Join(s, "  ")
}

// print writes the table: grouped by workload and metric, each backend's median and
// range, and the ratio of ax's median to the backend's.
func (t *table) print(w io.Writer) {
	keys := slices.Clone(t.order)
	pos := map[string]int{}
	for i, k := range t.order {
		s := t.rows[k]
		if _, ok := pos[s.workload]; !ok {
			pos[s.workload] = i
		}
		if _, ok := pos[s.workload+"\x00"+s.metric]; !ok {
			pos[s.workload+"\x00"+s.metric] = i
		}
	}
	slices.SortStableFunc(keys, func(a, b string) int {
		sa, sb := t.rows[a], t.rows[b]
		if c := pos[sa.workload] - pos[sb.workload]; c != 0 {
			return c
		}
		return pos[sa.workload+"\x00"+sa.metric] - pos[sb.workload+"\x00"+sb.metric]
	})
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tmetric\tbackend\truns\tmedian\tmin–max\tax/peer\tbetter\t")
	last := ""
	for _, k := range keys {
		s := t.rows[k]
		group := s.workload + "\x00" + s.metric
		if last != "" && last != group {
			fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t")
		}
		last = group
		med := median(s.values)
		lo, hi := slices.Min(s.values), slices.Max(s.values)
		ratio := ""
		if axKey, ok := t.ax[group]; ok && axKey != k {
			axMed := median(t.rows[axKey].values)
			switch {
			case med < 0 || axMed < 0: // an early median: no meaningful ratio
				ratio = "n/a"
			case med == 0 && axMed == 0:
				ratio = "="
			case med == 0:
				ratio = "inf"
			default:
				ratio = fmt.Sprintf("%.2fx", axMed/med)
			}
		}
		better := "lower"
		if s.higher {
			better = "higher"
		}
		fmt.Fprintf(tw, "%s\t%s (%s)\t%s\t%d\t%s\t%s–%s\t%s\t%s\t\n", s.workload, s.metric, s.unit, s.backend, len(s.values),
			format(med, s.unit), format(lo, s.unit), format(hi, s.unit), ratio, better)
	}
	tw.Flush()
	fmt.Fprint(w, `
ax/peer is ax's median divided by the peer's: for "better: higher" (throughput) a
ratio above 1 means ax is faster; for "better: lower" (lateness, early starts, server
cost) a ratio below 1 means ax is better. Lateness is handler start - due time, both
read from the local clock (PostgreSQL, Redis and the workers share this machine).
enqueue-batch: ax SubmitMany and River InsertMany (multi-row INSERT) per 1,000
tasks; River InsertManyFast (COPY) is its own row; asynq has no batch API: 8
goroutines each calling Enqueue. Redis commands and CPU are server-wide (the Redis
server is shared), so ax and River rows show the background level. Drain's store
server cpu is PostgreSQL's for ax and River, redis-server's for asynq.
`)
}
