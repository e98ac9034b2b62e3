package retention

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"
)

// historyPruner records PruneLeadership's calls and deletes full batches n times.
type historyPruner struct {
	calls []string
	full  int
}

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
		History: h, Namespace: "orders", HistoryAge: 24 * time.Hour, HistoryRows: 1000,
	})
	if err != nil || n != 21 {
		t.Fatalf("Once = %d, %v; want 21 (two full batches and one short)", n, err)
	}
	want := "orders 2026-12-05T12:00:00Z 1000"
	if len(h.calls) != 3 || h.calls[0] != want || h.calls[2] != want {
		t.Errorf("PruneLeadership calls %q, want three of %q", h.calls, want)
	}
}
