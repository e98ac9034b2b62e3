package retention

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/memory"
)

// A round deletes the gaps of schedules that ended longer ago than GapAge, a batch at
// a time, and leaves the younger ones.
func TestOncePrunesOldGaps(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	defer st.Close()
	now := time.Now().UTC().Truncate(time.Second)
	base := now.Add(-10 * time.Hour)
	if _, err := st.RegisterSchedules(ctx, []store.ScheduleDef{{Name: "report", Spec: "@every 1m0s", TimeZone: "UTC",
		Overlap: store.OverlapSkip, Misfire: store.MisfireSkip, NextFireAt: base}}); err != nil {
		t.Fatal(err)
	}
	var gaps []store.SlotGap
	for h := range 10 { // ending 10h, 9h, … 1h ago
		from := base.Add(time.Duration(h) * time.Hour)
		gaps = append(gaps, store.SlotGap{From: from, Until: from.Add(time.Minute), Why: store.GapMissed, Result: "skipped"})
	}
	if res, err := st.FireSchedule(ctx, store.FireParams{Name: "report", Expect: base, Next: now, Gaps: gaps}); err != nil || !res.Applied {
		t.Fatalf("FireSchedule = %+v, %v", res, err)
	}
	cfg := Config{Store: st, Now: func() time.Time { return now }, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		GapAge: 5 * time.Hour, Batch: 2}
	n, err := Once(ctx, cfg)
	if err != nil || n != 5 {
		t.Fatalf("Once = %d, %v; want the 5 gaps that ended more than 5h ago", n, err)
	}
	left, err := st.SlotGaps(ctx, "report", base, now, 100)
	if err != nil || len(left) != 5 || left[len(left)-1].Until.Before(now.Add(-5*time.Hour)) {
		t.Errorf("gaps left = %+v, %v; want the 5 youngest", left, err)
	}
	if n, err := Once(ctx, Config{Store: st, Now: cfg.Now, Log: cfg.Log, Batch: 2}); err != nil || n != 0 {
		t.Errorf("Once without a GapAge = %d, %v; want nothing deleted", n, err)
	}
}

// historyPruner records PruneLeadership's calls and deletes full batches n times.
type historyPruner struct {
	store.Pruner // nil: only PruneKeyStarts and PruneLeadership are called
	calls        []string
	full         int
}

func (h *historyPruner) PruneKeyStarts(ctx context.Context, limit int) (int, error) { return 0, nil }

func (h *historyPruner) PruneLeadership(ctx context.Context, namespace string, before time.Time, keepNewest, limit int) (int, error) {
	h.calls = append(h.calls, namespace+" "+before.Format(time.RFC3339)+" "+strconv.Itoa(keepNewest))
	if len(h.calls) <= h.full {
		return limit, nil
	}
	return 1, nil
}

// TestOnceDrainsTheLeadershipHistory: a round prunes the namespace's history by age
// and count, batch after batch until one is short.
func TestOnceDrainsTheLeadershipHistory(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	h := &historyPruner{full: 2}
	n, err := Once(t.Context(), Config{
		Now: func() time.Time { return now }, Log: slog.New(slog.DiscardHandler), Batch: 10,
		Store: h, Namespace: "orders", HistoryAge: 24 * time.Hour, HistoryRows: 1000,
	})
	if err != nil || n != 21 {
		t.Fatalf("Once = %d, %v; want 21 (two full batches and one short)", n, err)
	}
	want := "orders 2026-12-05T12:00:00Z 1000"
	if len(h.calls) != 3 || slices.ContainsFunc(h.calls, func(c string) bool { return c != want }) {
		t.Errorf("PruneLeadership calls %q, want three of %q", h.calls, want)
	}
}

// hungStats is a store that never answers PruneStats until its ctx ends.
type hungStats struct {
	store.Pruner // nil: only PruneStats is called
	deadline     bool
}

func (h *hungStats) PruneStats(ctx context.Context, before time.Time, limit int) (int, error) {
	_, h.deadline = ctx.Deadline()
	<-ctx.Done()
	return 0, ctx.Err()
}

// TestOnceBoundsEachCall: a store that stops answering holds a round for Timeout, not
// for as long as the round's ctx lives.
func TestOnceBoundsEachCall(t *testing.T) {
	t.Parallel()
	h := &hungStats{}
	_, err := Once(t.Context(), Config{
		Now: time.Now, Log: slog.New(slog.DiscardHandler), Batch: 10,
		Store: h, StatsAge: time.Hour, Timeout: time.Millisecond,
	})
	if !errors.Is(err, context.DeadlineExceeded) || !h.deadline {
		t.Errorf("Once with a hung store = %v (deadline set: %v), want context.DeadlineExceeded", err, h.deadline)
	}
}
