package ax_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store/memory"
)

// eventLog is an Observer that keeps the events it is given.
type eventLog struct {
	mu     sync.Mutex
	events []ax.Event
}

func (l *eventLog) Observe(e ax.Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *eventLog) count(kind ax.EventKind, name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e.Kind == kind && (e.Name == name || e.Schedule == name) {
			n++
		}
	}
	return n
}

// Handlers and schedules registered after Start work: a schedule is stored at once
// and fires from its next slot; a task that came due before its handler existed is
// reported (a WARN at most once a minute per name, an event each time) and runs once
// the handler is there.
func TestRegistrationAfterStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		events := &eventLog{}
		warns := &logCapture{}
		s := newScheduler(t, st, func(c *ax.Config) { c.Logger, c.Observer = slog.New(warns), events })
		ctx := context.Background()
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		// A task under a name nobody handles yet.
		early, err := s.Delay(ctx, "late.handler", "k", 0)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second) // several dispatch retries (100ms, 200ms, …)
		synctest.Wait()
		if n := len(warns.matching(slog.LevelWarn, "name=late.handler")); n != 1 {
			t.Errorf("%d WARNs naming late.handler in 3s, want exactly 1 (at most one a minute)", n)
		}
		unhandled := events.count(ax.EventUnhandled, "late.handler")
		if unhandled < 2 {
			t.Errorf("%d unhandled events, want one per hand-back (several)", unhandled)
		}
		var lateRuns atomic.Int32
		s.HandleFunc("late.handler", func(context.Context, *ax.Task) error { lateRuns.Add(1); return nil })

		var ticks []time.Time
		var mu sync.Mutex
		s.HandleFunc("tick", func(context.Context, *ax.Task) error {
			mu.Lock()
			ticks = append(ticks, time.Now())
			mu.Unlock()
			return nil
		})
		registered := time.Now()
		if err := s.Every("tick", 10*time.Second); err != nil {
			t.Fatalf("Every after Start: %v", err)
		}
		got, err := s.Schedules(ctx)
		if err != nil || len(got) != 1 || got[0].Name != "tick" || got[0].Dormant {
			t.Fatalf("Schedules right after Every = %+v, %v; want tick, stored and registered", got, err)
		}
		time.Sleep(35 * time.Second)
		synctest.Wait()
		mu.Lock()
		want := int(registered.Add(35*time.Second).Sub(t0)/(10*time.Second)) - int(registered.Sub(t0)/(10*time.Second))
		if len(ticks) != want {
			t.Errorf("schedule registered after Start ran %d times in 35s, want %d (%v)", len(ticks), want, ticks)
		}
		for _, at := range ticks {
			if !at.After(registered) {
				t.Errorf("a slot at %v ran, not after the registration at %v", at, registered)
			}
		}
		mu.Unlock()
		task := mustGet(t, s, early.ID)
		if task.Status != ax.Succeeded || lateRuns.Load() != 1 {
			t.Errorf("task submitted before its handler: %s, %d runs; want SUCCEEDED once", task.Status, lateRuns.Load())
		}

		// Deleting the schedule stops it (TestDeleteDormantSchedule checks the
		// pending occurrence).
		if err := s.DeleteSchedule(ctx, "tick"); err != nil {
			t.Fatalf("DeleteSchedule: %v", err)
		}
		mu.Lock()
		before := len(ticks)
		mu.Unlock()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		mu.Lock()
		after := len(ticks)
		mu.Unlock()
		if after != before {
			t.Errorf("a deleted schedule ran %d more times", after-before)
		}
		if got, err := s.Schedules(ctx); err != nil || len(got) != 0 {
			t.Errorf("Schedules after DeleteSchedule = %+v, %v; want none", got, err)
		}
		if err := s.DeleteSchedule(ctx, "tick"); !errors.Is(err, ax.ErrNotFound) {
			t.Errorf("DeleteSchedule twice: %v, want ErrNotFound", err)
		}
		stop(t, s)
	})
}

// DeleteSchedule retires a dormant schedule: one stored by an earlier version of the
// code and registered by nobody now. Its occurrence already written and not yet run
// is cancelled.
func TestDeleteDormantSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		ctx := context.Background()
		t0 := time.Now() // a slot of every 10s; the first to fire is +10s
		old := newScheduler(t, st, nil)
		old.HandleFunc("legacy", func(context.Context, *ax.Task) error { return nil })
		if err := old.Every("legacy", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := old.Start(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(9 * time.Second) // the +10s occurrence is written, not yet due
		synctest.Wait()
		stop(t, old)
		pending, err := old.Lookup(ctx, "legacy", slotKey(t0.Add(10*time.Second)))
		if err != nil || pending.Status != ax.Scheduled {
			t.Fatalf("occurrence before the delete: %+v, %v; want SCHEDULED", pending, err)
		}

		s := newScheduler(t, st, nil)
		got, err := s.Schedules(ctx)
		if err != nil || len(got) != 1 || !got[0].Dormant {
			t.Fatalf("Schedules = %+v, %v; want legacy, dormant", got, err)
		}
		if err := s.DeleteSchedule(ctx, "legacy"); err != nil {
			t.Fatalf("DeleteSchedule of a dormant schedule: %v", err)
		}
		if got, err := s.Schedules(ctx); err != nil || len(got) != 0 {
			t.Errorf("after DeleteSchedule: %+v, %v; want none", got, err)
		}
		if got := mustGet(t, s, pending.ID); got.Status != ax.Cancelled {
			t.Errorf("the pending occurrence after DeleteSchedule is %s, want CANCELLED", got.Status)
		}
	})
}

// A zone without an IANA name cannot be stored and restored, so Cron refuses it; an
// IANA zone is restored faithfully through pause, resume and restart.
func TestCronTimeZones(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	s := newScheduler(t, st, nil)
	s.HandleFunc("report", func(context.Context, *ax.Task) error { return nil })
	for name, loc := range map[string]*time.Location{
		"FixedZone IST":             time.FixedZone("IST", 19800),
		"FixedZone CET without DST": time.FixedZone("CET", 3600),
		"Local":                     time.Local,
	} {
		if err := s.Cron("report", "0 9 * * *", ax.WithTimeZone(loc)); !errors.Is(err, ax.ErrInvalid) || !strings.Contains(err.Error(), "TimeZone") {
			t.Errorf("Cron in %s: %v, want ErrInvalid naming TimeZone", name, err)
		}
	}
	if err := s.Cron("report", "0 0 30 2 *"); !errors.Is(err, ax.ErrInvalid) {
		t.Errorf(`Cron("0 0 30 2 *"): %v, want ErrInvalid: no date satisfies it`, err)
	}
	kolkata := mustLoad(t, "Asia/Kolkata")
	if err := s.Cron("report", "0 9 * * *", ax.WithTimeZone(kolkata)); err != nil {
		t.Fatal(err)
	}
	start(t, s)
	ctx := context.Background()
	if err := s.PauseSchedule(ctx, "report"); err != nil {
		t.Fatal(err)
	}
	if err := s.ResumeSchedule(ctx, "report"); err != nil {
		t.Fatalf("ResumeSchedule in Asia/Kolkata: %v", err)
	}
	got, err := s.Schedules(ctx)
	if err != nil || len(got) != 1 || got[0].TimeZone != "Asia/Kolkata" {
		t.Fatalf("Schedules = %+v, %v", got, err)
	}
	if h, m, _ := got[0].NextFireAt.In(kolkata).Clock(); h != 9 || m != 0 {
		t.Errorf("next fire %v is %02d:%02d in Kolkata, want 09:00", got[0].NextFireAt, h, m)
	}
	// Restart: a new scheduler that does not register it (it is dormant there)
	// pauses and resumes it from the stored zone alone, and one that registers it
	// again keeps its timing.
	if err := s.Stop(ctx); err != nil { // start's cleanup would stop it only at the end
		t.Fatal(err)
	}
	dormant := newScheduler(t, st, nil)
	if err := dormant.PauseSchedule(ctx, "report"); err != nil {
		t.Fatal(err)
	}
	if err := dormant.ResumeSchedule(ctx, "report"); err != nil {
		t.Fatalf("ResumeSchedule from the stored zone after a restart: %v", err)
	}
	again := newScheduler(t, st, nil)
	again.HandleFunc("report", func(context.Context, *ax.Task) error { return nil })
	if err := again.Cron("report", "0 9 * * *", ax.WithTimeZone(kolkata)); err != nil {
		t.Fatal(err)
	}
	start(t, again)
	got, err = again.Schedules(ctx)
	if err != nil || len(got) != 1 || got[0].TimeZone != "Asia/Kolkata" || got[0].Paused || got[0].Dormant {
		t.Fatalf("after restart, Schedules = %+v, %v; want report in Asia/Kolkata, running", got, err)
	}
	if h, m, _ := got[0].NextFireAt.In(kolkata).Clock(); h != 9 || m != 0 {
		t.Errorf("after restart, next fire %v is %02d:%02d in Kolkata, want 09:00", got[0].NextFireAt, h, m)
	}
}

func TestNextFireTimes(t *testing.T) {
	t.Parallel()
	ny := mustLoad(t, "America/New_York")
	from := time.Date(2026, 3, 7, 0, 0, 0, 0, time.UTC)
	got, err := ax.NextFireTimes("30 2 * * *", ny, from, 3)
	if err != nil {
		t.Fatal(err)
	}
	// 02:30 does not exist on 8 March in New York: it fires once, at the jump.
	want := []string{"2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}
	for i := range want {
		if i >= len(got) || got[i].Format(time.RFC3339) != want[i] {
			t.Fatalf("NextFireTimes = %v, want %v", got, want)
		}
	}
	if got, err := ax.NextFireTimes("*/15 * * * *", nil, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 2); err != nil ||
		len(got) != 2 || got[0] != time.Date(2026, 1, 1, 0, 15, 0, 0, time.UTC) {
		t.Errorf("NextFireTimes(*/15) = %v, %v; want 00:15, 00:30 (strictly after from)", got, err)
	}
	for spec, loc := range map[string]*time.Location{"0 0 30 2 *": nil, "61 * * * *": nil, "0 9 * * *": time.FixedZone("IST", 19800)} {
		if _, err := ax.NextFireTimes(spec, loc, from, 3); !errors.Is(err, ax.ErrInvalid) {
			t.Errorf("NextFireTimes(%q, %v): %v, want ErrInvalid", spec, loc, err)
		}
	}
	if _, err := ax.NextFireTimes("@daily", nil, from, 0); !errors.Is(err, ax.ErrInvalid) {
		t.Errorf("NextFireTimes with n = 0: %v, want ErrInvalid", err)
	}
}
