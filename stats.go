package ax

import (
	"cmp"
	"context"
	"math"
	"slices"
	"time"

	"github.com/axsched/ax/store"
)

// StatsSummary is what the executions of every scheduler of the namespace did, minute
// by minute, over a window (Scheduler.Stats).
type StatsSummary struct {
	// Minutes are the minutes in which executions finished, oldest first; a minute
	// without any is absent.
	Minutes []MinuteStats
	// Executions sums the minutes' counts.
	Executions ExecutionCounts
	// Early counts the executions that started before they were due without a
	// Trigger, over the window: a broken guarantee, which must stay 0.
	Early int64
	// TopFailing holds the names with the most unsuccessful executions over the
	// window (failed, panicked, timed out, orphaned), most first, at most 20. Each
	// scheduler keeps its 20 names failing most per minute, so a name that failed
	// rarely on each of many schedulers may be undercounted.
	TopFailing []NameCount
	// Truncated reports that the store held more minutes than one read returns
	// (61 minutes of 64 schedulers): the oldest minutes of the window are missing.
	Truncated bool
}

// MinuteStats is what the namespace's executions did in one minute: those whose result
// was written in it, by the scheduler's clock.
type MinuteStats struct {
	Minute     time.Time // UTC, a whole minute
	Nodes      int       // the schedulers (Config.Node) whose executions it counts
	Executions ExecutionCounts
	// Scheduled counts the executions that started on schedule, not by a Trigger:
	// the ones whose lateness (start − due) the percentiles describe.
	Scheduled int64
	// LatenessP50 and LatenessP99 are percentiles of the lateness of the Scheduled
	// executions, from a histogram with the metrics package's buckets (1ms, 2.5ms,
	// 5ms … 15m, 1h): a percentile is the upper edge of the bucket it falls in, or
	// LatenessMax when that is smaller (and LatenessMax above an hour). An early start
	// counts as 0. Zero when none started on schedule.
	LatenessP50 time.Duration
	LatenessP99 time.Duration
	// LatenessMax is the largest lateness, to the microsecond.
	LatenessMax time.Duration
	// Early counts the executions that started before they were due without a
	// Trigger: it must be 0.
	Early int64
	// Failing holds the names with the most unsuccessful executions in the minute,
	// most first, at most 20.
	Failing []NameCount
}

// ExecutionCounts counts executions by outcome (see Outcome).
type ExecutionCounts struct {
	Succeeded int64
	Failed    int64 // the handler returned an error
	Panicked  int64
	TimedOut  int64
	Released  int64 // Stop interrupted it; it runs again without using a retry
	Orphaned  int64 // its executor stopped heartbeating
	// Retried counts the unsuccessful executions (not Released) that run again as
	// a business retry; the others failed for good.
	Retried int64
}

// Total returns how many executions c counts.
func (c ExecutionCounts) Total() int64 {
	return c.Succeeded + c.Failed + c.Panicked + c.TimedOut + c.Released + c.Orphaned
}

func (c *ExecutionCounts) add(r *store.MinuteStats) {
	c.plus(ExecutionCounts{Succeeded: r.Succeeded, Failed: r.Failed, Panicked: r.Panicked, TimedOut: r.TimedOut,
		Released: r.Released, Orphaned: r.Orphaned, Retried: r.Retried})
}

func (c *ExecutionCounts) plus(o ExecutionCounts) {
	c.Succeeded += o.Succeeded
	c.Failed += o.Failed
	c.Panicked += o.Panicked
	c.TimedOut += o.TimedOut
	c.Released += o.Released
	c.Orphaned += o.Orphaned
	c.Retried += o.Retried
}

// NameCount is a task name and a count.
type NameCount struct {
	Name  string
	Count int64
}

// maxTopFailing is the most names in StatsSummary.TopFailing and MinuteStats.Failing.
const maxTopFailing = store.MaxStatsNames

// Stats returns the executions of every scheduler of the namespace, per minute, from
// the minute holding since until now, as the schedulers wrote them to the store (each
// every Config.ExecutionStatsInterval and at Stop; see Retention.Stats for how long
// they are kept). It reads the store once, in one bounded query, whatever the number
// of executions: a console may call it every few seconds. A zero since is ErrInvalid.
func (s *Scheduler) Stats(ctx context.Context, since time.Time) (*StatsSummary, error) {
	if since.IsZero() {
		return nil, errorf("ax: stats: zero since: %w", ErrInvalid)
	}
	rows, err := s.st.Stats(ctx, since.Truncate(time.Minute))
	if err != nil {
		return nil, errorf("ax: stats: %w", err)
	}
	return summarize(rows), nil
}

// summarize sums the rows, ordered by (Minute, Node), per minute and over the window.
func summarize(rows []store.MinuteStats) *StatsSummary {
	sum := &StatsSummary{Minutes: []MinuteStats{}, Truncated: len(rows) >= store.MaxStatsRead}
	failing := map[string]int64{}
	for i := 0; i < len(rows); {
		m := MinuteStats{Minute: rows[i].Minute.UTC()}
		var (
			hist  [store.LatenessBuckets]int64
			names = map[string]int64{}
		)
		for ; i < len(rows) && rows[i].Minute.Equal(m.Minute); i++ {
			r := &rows[i]
			m.Nodes++
			m.Executions.add(r)
			m.Early += r.Early
			m.LatenessMax = max(m.LatenessMax, r.MaxLateness)
			for b, n := range r.Lateness {
				hist[b] += n
				m.Scheduled += n
			}
			for _, f := range r.Failures {
				names[f.Name] += f.Count
				failing[f.Name] += f.Count
			}
		}
		m.LatenessP50 = percentile(&hist, m.Scheduled, 0.50, m.LatenessMax)
		m.LatenessP99 = percentile(&hist, m.Scheduled, 0.99, m.LatenessMax)
		m.Failing = topNames(names)
		sum.Executions.plus(m.Executions)
		sum.Early += m.Early
		sum.Minutes = append(sum.Minutes, m)
	}
	sum.TopFailing = topNames(failing)
	return sum
}

// percentile returns the upper edge of the bucket holding the q-quantile of the n
// values in hist, capped at largest; the overflow bucket's is largest.
func percentile(hist *[store.LatenessBuckets]int64, n int64, q float64, largest time.Duration) time.Duration {
	if n == 0 {
		return 0
	}
	rank := max(int64(math.Ceil(q*float64(n))), 1)
	var seen int64
	for b, c := range hist {
		if seen += c; seen >= rank {
			if edge := store.LatenessEdge(b); edge >= 0 && edge < largest {
				return edge
			}
			return largest
		}
	}
	return largest
}

// topNames returns the maxTopFailing names with the highest counts, highest first,
// then by name.
func topNames(counts map[string]int64) []NameCount {
	out := make([]NameCount, 0, len(counts))
	for name, c := range counts {
		out = append(out, NameCount{Name: name, Count: c})
	}
	slices.SortFunc(out, func(a, b NameCount) int { return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Name, b.Name)) })
	return out[:min(len(out), maxTopFailing)]
}
