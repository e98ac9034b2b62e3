package retention

import (
	"context"
	"io"
	"log/slog"
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
		Gaps: st, GapAge: 5 * time.Hour, Batch: 2}
	n, err := Once(ctx, cfg)
	if err != nil || n != 5 {
		t.Fatalf("Once = %d, %v; want the 5 gaps that ended more than 5h ago", n, err)
	}
	left, err := st.SlotGaps(ctx, "report", base, now, 100)
	if err != nil || len(left) != 5 || left[len(left)-1].Until.Before(now.Add(-5*time.Hour)) {
		t.Errorf("gaps left = %+v, %v; want the 5 youngest", left, err)
	}
	if n, err := Once(ctx, Config{Store: st, Now: cfg.Now, Log: cfg.Log, Gaps: st, Batch: 2}); err != nil || n != 0 {
		t.Errorf("Once without a GapAge = %d, %v; want nothing deleted", n, err)
	}
}
