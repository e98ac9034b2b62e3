package ax_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store/memory"
)

// runs records a handler's executions: when each started and finished, and the
// most that ran at once.
type runs struct {
	mu        sync.Mutex
	active    int
	maxActive int
	starts    map[string]time.Time // by occurrence key
	ends      map[string]time.Time
	all       []started // every start, of any handler name
}

type started struct {
	name string
	slot time.Time // the occurrence's slot (its key)
	at   time.Time
}

func newRuns() *runs {
	return &runs{starts: map[string]time.Time{}, ends: map[string]time.Time{}}
}

// handler returns a handler that takes took(key) to run.
func (r *runs) handler(took func(key string) time.Duration) ax.HandlerFunc {
	return func(ctx context.Context, t *ax.Task) error {
		r.mu.Lock()
		r.active++
		r.maxActive = max(r.maxActive, r.active)
		r.starts[t.Key] = time.Now()
		slot, _ := time.Parse(time.RFC3339Nano, t.Key)
		r.all = append(r.all, started{name: t.Name, slot: slot, at: time.Now()})
		r.mu.Unlock()
		time.Sleep(took(t.Key))
		r.mu.Lock()
		r.active--
		r.ends[t.Key] = time.Now()
		r.mu.Unlock()
		return nil
	}
}

func (r *runs) maxConcurrent() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.maxActive
}

func (r *runs) started(key string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.starts[key]
	return t, ok
}

// slotKey is the key of the occurrence at slot.
func slotKey(slot time.Time) string { return slot.UTC().Format(time.RFC3339Nano) }

// startScheduler starts a scheduler on st with a handler and a schedule registered by
// register; it is stopped at the end of the bubble's test.
func startScheduler(t *testing.T, st ax.Store, cfg ax.Config, name string, h ax.Handler, register func(s *ax.Scheduler) error) *ax.Scheduler {
	t.Helper()
	cfg.Store = st
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	s, err := ax.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Handle(name, h)
	if err := register(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func stop(t *testing.T, s *ax.Scheduler) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// The reconciliation case: every 2s, and a run sometimes takes 5s. With
// OverlapSkip (the default) two runs never overlap, the slots inside a long run are
// SKIPPED with the reason, and the first slot after it runs on time.
func TestEveryOverlapSkip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		t0 := time.Now() // 2000-01-01T00:00:00Z: a slot of every 2s
		slow := map[string]bool{slotKey(t0.Add(2 * time.Second)): true, slotKey(t0.Add(12 * time.Second)): true}
		r := newRuns()
		s := startScheduler(t, st, ax.Config{}, "reconcile", r.handler(func(key string) time.Duration {
			if slow[key] {
				return 5 * time.Second
			}
			return 100 * time.Millisecond
		}), func(s *ax.Scheduler) error { return s.Every("reconcile", 2*time.Second) })
		time.Sleep(21 * time.Second)
		synctest.Wait()
		stop(t, s)

		if n := r.maxConcurrent(); n != 1 {
			t.Errorf("at most %d runs at once, want 1", n)
		}
		ctx := context.Background()
		want := map[int]ax.Status{ // slot (seconds after t0) → outcome
			2: ax.Succeeded, 4: ax.Skipped, 6: ax.Skipped, 8: ax.Succeeded, 10: ax.Succeeded,
			12: ax.Succeeded, 14: ax.Skipped, 16: ax.Skipped, 18: ax.Succeeded, 20: ax.Succeeded,
		}
		for sec, status := range want {
			slot := t0.Add(time.Duration(sec) * time.Second)
			task, err := s.Lookup(ctx, "reconcile", slotKey(slot))
			if err != nil {
				t.Errorf("slot +%ds: %v", sec, err)
				continue
			}
			if task.Status != status || task.TaskKey != "reconcile" || task.Overlap != ax.OverlapSkip || !task.DueAt.Equal(slot) {
				t.Errorf("slot +%ds: %s key %q overlap %s due %v; want %s, key reconcile, skip, due at the slot",
					sec, task.Status, task.TaskKey, task.Overlap, task.DueAt, status)
			}
			if status == ax.Skipped && !strings.Contains(task.LastError, `task key "reconcile" held by task`) {
				t.Errorf("slot +%ds skipped with LastError %q, want the reason", sec, task.LastError)
			}
			if status == ax.Succeeded {
				started, _ := r.started(task.Key)
				if late := started.Sub(slot); late < 0 || late > 50*time.Millisecond {
					t.Errorf("slot +%ds started %v after its slot, want on time", sec, late)
				}
			}
		}
	})
}

// OverlapQueue runs the occurrences that come due during a long run one after
// another, each as soon as the previous one finished.
func TestEveryOverlapQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		t0 := time.Now()
		r := newRuns()
		s := startScheduler(t, st, ax.Config{}, "reconcile", r.handler(func(string) time.Duration { return 3 * time.Second }),
			func(s *ax.Scheduler) error {
				return s.Every("reconcile", 2*time.Second, ax.WithOverlap(ax.OverlapQueue))
			})
		time.Sleep(11 * time.Second)
		synctest.Wait()
		stop(t, s)

		if n := r.maxConcurrent(); n != 1 {
			t.Errorf("at most %d runs at once, want 1", n)
		}
		// Slots at 2, 4, 6, … each take 3s: they start at 2, 5, 8, 11.
		for i, sec := range []int{2, 4, 6, 8} {
			slot := t0.Add(time.Duration(sec) * time.Second)
			started, ok := r.started(slotKey(slot))
			want := t0.Add(time.Duration(2+3*i) * time.Second)
			if !ok || started.Sub(want) < 0 || started.Sub(want) > 50*time.Millisecond {
				t.Errorf("slot +%ds started at +%v, want right after the previous run, at +%v", sec, started.Sub(t0), want.Sub(t0))
			}
		}
	})
}

// OverlapAllow lets occurrences run at once.
func TestEveryOverlapAllow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		r := newRuns()
		s := startScheduler(t, st, ax.Config{}, "reconcile", r.handler(func(string) time.Duration { return 5 * time.Second }),
			func(s *ax.Scheduler) error {
				return s.Every("reconcile", 2*time.Second, ax.WithOverlap(ax.OverlapAllow))
			})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		stop(t, s)
		if n := r.maxConcurrent(); n != 3 {
			t.Errorf("at most %d runs at once, want 3 (5s runs every 2s)", n)
		}
	})
}

// One-off tasks with a task key queue behind each other by default.
func TestTaskKeyOneOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		r := newRuns()
		s := startScheduler(t, st, ax.Config{}, "refund", r.handler(func(string) time.Duration { return time.Second }),
			func(*ax.Scheduler) error { return nil })
		ctx := context.Background()
		t0 := time.Now()
		for _, key := range []string{"a", "b", "c"} {
			if _, err := s.Delay(ctx, "refund", key, time.Second, ax.WithTaskKey("account-7")); err != nil {
				t.Fatal(err)
			}
		}
		skip, err := s.Delay(ctx, "refund", "d", 1500*time.Millisecond, ax.WithTaskKey("account-7"), ax.WithOverlap(ax.OverlapSkip))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		stop(t, s)
		if n := r.maxConcurrent(); n != 1 {
			t.Errorf("at most %d runs at once, want 1", n)
		}
		var starts []time.Duration
		for _, key := range []string{"a", "b", "c"} {
			started, ok := r.started(key)
			if !ok {
				t.Fatalf("task %s never ran", key)
			}
			starts = append(starts, started.Sub(t0))
		}
		slices.Sort(starts)
		for i, want := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second} {
			if d := starts[i] - want; d < 0 || d > 50*time.Millisecond {
				t.Errorf("run %d started at +%v, want +%v", i, starts[i], want)
			}
		}
		got, err := s.Get(ctx, skip.ID)
		if err != nil || got.Status != ax.Skipped {
			t.Errorf("the skip task = %v, %v; want SKIPPED", got, err)
		}
	})
}

// After ten minutes with no scheduler, an every-2-minute schedule (slots at 2, 4, 6,
// 8, 10 missed) fires once at once, or waits for its next slot, or catches up — per
// its misfire policy.
func TestMisfire(t *testing.T) {
	for _, tc := range []struct {
		policy     ax.MisfirePolicy
		maxCatchUp int
		overlap    ax.OverlapPolicy // "" for the default, OverlapSkip
		want       []int            // minutes after t0 of the occurrences that ran after the restart
	}{
		{ax.MisfireFireOnce, 0, "", []int{10, 12}},
		{ax.MisfireSkip, 0, "", []int{12}},
		{ax.MisfireCatchUp, 0, ax.OverlapQueue, []int{2, 4, 6, 8, 10, 12}},
		{ax.MisfireCatchUp, 3, ax.OverlapQueue, []int{6, 8, 10, 12}},
		// Catching up runs each missed slot even under skip: they queue.
		{ax.MisfireCatchUp, 0, "", []int{2, 4, 6, 8, 10, 12}},
	} {
		t.Run(fmt.Sprintf("%s/max%d/%s", tc.policy, tc.maxCatchUp, tc.overlap), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := memory.New()
				defer st.Close()
				t0 := time.Now()
				r := newRuns()
				register := func(s *ax.Scheduler) error {
					opts := []ax.ScheduleOption{ax.WithMisfire(tc.policy)}
					if tc.overlap != "" {
						opts = append(opts, ax.WithOverlap(tc.overlap))
					}
					return s.Every("report", 2*time.Minute, opts...)
				}
				quick := r.handler(func(string) time.Duration { return time.Second })
				// Registered, then down from +30s to +11m.
				s := startScheduler(t, st, ax.Config{}, "report", quick, register)
				time.Sleep(30 * time.Second)
				stop(t, s)
				time.Sleep(10*time.Minute + 30*time.Second)
				restart := time.Now()
				s = startScheduler(t, st, ax.Config{MaxCatchUp: tc.maxCatchUp}, "report", quick, register)
				time.Sleep(2 * time.Minute)
				synctest.Wait()
				stop(t, s)

				r.mu.Lock()
				defer r.mu.Unlock()
				var got []int
				for min := 2; min <= 14; min += 2 {
					if _, ok := r.starts[slotKey(t0.Add(time.Duration(min)*time.Minute))]; ok {
						got = append(got, min)
					}
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("slots run (minutes after t0) = %v, want %v", got, tc.want)
				}
				for _, min := range tc.want {
					slot := t0.Add(time.Duration(min) * time.Minute)
					started := r.starts[slotKey(slot)]
					if slot.Before(restart) && started.Sub(restart) > 10*time.Second {
						t.Errorf("missed slot +%dm ran %v after the restart, want at once", min, started.Sub(restart))
					}
					if slot.After(restart) && (started.Before(slot) || started.Sub(slot) > 50*time.Millisecond) {
						t.Errorf("slot +%dm ran at %v, want on time", min, started.Sub(t0))
					}
				}
			})
		})
	}
}

// Schedules are stored at Start; a restart with a new spec updates them; one no
// longer registered is reported dormant and does not fire; a pause survives a
// restart and a resume skips the slots missed meanwhile.
func TestScheduleDefinitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		ctx := context.Background()
		t0 := time.Now()
		r := newRuns()
		quick := r.handler(func(string) time.Duration { return 0 })
		s := startScheduler(t, st, ax.Config{}, "report", quick, func(s *ax.Scheduler) error {
			if err := s.Cron("report", "0 * * * * *", ax.WithTimeZone(mustLoad(t, "Europe/Berlin"))); err != nil {
				return err
			}
			s.Handle("legacy", quick)
			return s.Every("legacy", time.Minute)
		})
		got, err := s.Schedules(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[1].Name != "report" || got[1].Spec != "0 * * * * *" || got[1].TimeZone != "Europe/Berlin" ||
			got[1].Overlap != ax.OverlapSkip || got[1].Misfire != ax.MisfireFireOnce || got[1].Dormant || got[1].Paused ||
			!got[1].NextFireAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("Schedules = %+v", got)
		}
		if err := s.PauseSchedule(ctx, "report"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Minute)
		stop(t, s)

		// Restarted without "legacy", with a new spec for "report": still paused.
		s = startScheduler(t, st, ax.Config{}, "report", quick, func(s *ax.Scheduler) error {
			return s.Cron("report", "@every 30s", ax.WithMisfire(ax.MisfireCatchUp))
		})
		got, err = s.Schedules(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || !got[0].Dormant || got[0].Name != "legacy" || got[1].Spec != "@every 30s" || !got[1].Paused ||
			got[1].Misfire != ax.MisfireCatchUp {
			t.Fatalf("after restart, Schedules = %+v; want legacy dormant, report paused with the new spec", got)
		}
		time.Sleep(2 * time.Minute)
		resumed := time.Now()
		if err := s.ResumeSchedule(ctx, "report"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		stop(t, s)

		r.mu.Lock()
		defer r.mu.Unlock()
		restarted := resumed.Add(-2 * time.Minute)
		reportRuns := 0
		for _, run := range r.all {
			switch {
			case run.name == "legacy" && run.slot.After(restarted.Add(2*time.Second)):
				t.Errorf("dormant legacy ran its slot +%v", run.slot.Sub(t0))
			case run.name == "report" && run.at.Before(resumed):
				t.Errorf("report ran its slot +%v at +%v, while paused", run.slot.Sub(t0), run.at.Sub(t0))
			case run.name == "report" && run.slot.Before(resumed):
				t.Errorf("report ran its slot +%v from before the resume: a resume must not fire missed slots", run.slot.Sub(t0))
			case run.name == "report":
				reportRuns++
			}
		}
		if reportRuns != 2 {
			t.Errorf("%d runs of report in the minute after the resume, want 2 (every 30s)", reportRuns)
		}
		if _, err := s.Lookup(ctx, "legacy", slotKey(restarted.Add(time.Minute))); !errors.Is(err, ax.ErrNotFound) {
			t.Errorf("an occurrence of the dormant legacy schedule was written after the restart: %v", err)
		}
		if n := len(r.all) - reportRuns; n < 2 {
			t.Errorf("legacy ran %d times in the 3 minutes it was registered, want at least 2", n)
		}
		if errors.Is(s.PauseSchedule(ctx, "nope"), ax.ErrNotFound) == false {
			t.Errorf("PauseSchedule(unknown) is not ErrNotFound")
		}
	})
}

func mustLoad(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// Bad schedule definitions and misplaced options are ErrInvalid, naming the problem,
// and register nothing.
func TestScheduleInvalid(t *testing.T) {
	st := memory.New()
	defer st.Close()
	s, err := ax.New(ax.Config{Store: st, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	s.HandleFunc("job", func(context.Context, *ax.Task) error { return nil })
	for name, tc := range map[string]struct {
		call func() error
		want string
	}{
		"bad cron field":      {func() error { return s.Cron("job", "61 * * * *") }, "61"},
		"too many fields":     {func() error { return s.Cron("job", "* * * * * * *") }, "* * * * * * *"},
		"empty spec":          {func() error { return s.Cron("job", "") }, "empty"},
		"time zone in spec":   {func() error { return s.Cron("job", "CRON_TZ=Asia/Tokyo 0 9 * * *") }, "time zone"},
		"short interval":      {func() error { return s.Every("job", 500*time.Millisecond) }, "500ms"},
		"fractional interval": {func() error { return s.Every("job", 1500*time.Millisecond) }, "whole number of seconds"},
		"zone on interval":    {func() error { return s.Every("job", time.Minute, ax.WithTimeZone(time.UTC)) }, "TimeZone"},
		"unknown overlap":     {func() error { return s.Every("job", time.Minute, ax.WithOverlap("sometimes")) }, "Overlap"},
		"unknown misfire":     {func() error { return s.Every("job", time.Minute, ax.WithMisfire("never")) }, "Misfire"},
		"nil zone":            {func() error { return s.Cron("job", "@daily", ax.WithTimeZone(nil)) }, "TimeZone"},
		"empty name":          {func() error { return s.Cron("", "@daily") }, "Name"},
		"overlap without key": {func() error {
			_, err := s.Delay(context.Background(), "job", "k", 0, ax.WithOverlap(ax.OverlapSkip))
			return err
		}, "WithTaskKey"},
		"empty task key": {func() error { _, err := s.Delay(context.Background(), "job", "k", 0, ax.WithTaskKey("")); return err }, "TaskKey"},
	} {
		err := tc.call()
		if !errors.Is(err, ax.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error = %v; want ErrInvalid mentioning %q", name, err, tc.want)
		}
	}
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Schedules(ctx); err != nil || len(got) != 0 {
		t.Errorf("after invalid registrations, Schedules = %+v, %v; want none", got, err)
	}
	if err := s.Every("nohandler", time.Minute); !errors.Is(err, ax.ErrInvalid) || !strings.Contains(err.Error(), "no handler") {
		t.Errorf("Every after Start without a handler: error = %v, want ErrInvalid saying so", err)
	}
	if got, err := s.Schedules(ctx); err != nil || len(got) != 0 {
		t.Errorf("after a refused registration, Schedules = %+v, %v; want none", got, err)
	}
	stop(t, s)

	// A schedule whose handler is missing fails Start.
	s2, err := ax.New(ax.Config{Store: st, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Every("orphan", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s2.Start(ctx); !errors.Is(err, ax.ErrInvalid) || !strings.Contains(err.Error(), "orphan") {
		t.Errorf("Start with a schedule without handler: error = %v, want ErrInvalid naming it", err)
	}
}

// A daily 02:30 job, end to end through the scheduler, across the DST changes of
// New York and Berlin: on the spring-forward day it fires once, at the jump (03:00
// local); on Berlin's fall-back day, where 02:30 happens twice, once, at the first;
// on New York's, where 02:30 happens once, at 02:30 EST. (internal/cronspec pins the
// rules in detail.) The store's clock is moved to the days in question, and the
// scheduler follows it as it would a database's.
func TestCronAcrossDST(t *testing.T) {
	for _, tc := range []struct {
		zone  string
		start string   // UTC, the store's time when the scheduler starts
		want  []string // UTC fire times over the next three days
	}{
		{"America/New_York", "2026-03-07T00:00:00Z", []string{"2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		{"America/New_York", "2026-10-31T00:00:00Z", []string{"2026-10-31T06:30:00Z", "2026-11-01T07:30:00Z", "2026-11-02T07:30:00Z"}},
		{"Europe/Berlin", "2026-03-28T00:00:00Z", []string{"2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"Europe/Berlin", "2026-10-24T00:00:00Z", []string{"2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
	} {
		t.Run(tc.zone+"/"+tc.start[:10], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start, err := time.Parse(time.RFC3339, tc.start)
				if err != nil {
					t.Fatal(err)
				}
				st := memory.New(memory.WithClockSkew(start.Sub(time.Now())))
				defer st.Close()
				r := newRuns()
				// Three days of fake time: refill rarely, there is nothing else to read.
				s := startScheduler(t, st, ax.Config{RefillInterval: 10 * time.Minute}, "daily", r.handler(func(string) time.Duration { return time.Second }),
					func(s *ax.Scheduler) error {
						return s.Cron("daily", "30 2 * * *", ax.WithTimeZone(mustLoad(t, tc.zone)))
					})
				time.Sleep(72 * time.Hour)
				synctest.Wait()
				stop(t, s)
				r.mu.Lock()
				defer r.mu.Unlock()
				var got []string
				for key := range r.starts {
					got = append(got, key)
				}
				slices.Sort(got)
				if strings.Join(got, " ") != strings.Join(tc.want, " ") {
					t.Errorf("fired at %v, want %v", got, tc.want)
				}
			})
		})
	}
}

// Two schedulers registering one schedule with different specs (a rolling deploy):
// the last to start owns its timing, and the other stops firing it rather than mix
// the two cadences.
func TestScheduleLastRegistrationWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		t0 := time.Now()
		r := newRuns()
		quick := r.handler(func(string) time.Duration { return 0 })
		old := startScheduler(t, st, ax.Config{}, "sync", quick, func(s *ax.Scheduler) error { return s.Every("sync", 2*time.Second) })
		time.Sleep(10 * time.Second)
		deployed := time.Now()
		updated := startScheduler(t, st, ax.Config{}, "sync", quick, func(s *ax.Scheduler) error { return s.Every("sync", 3*time.Second) })
		time.Sleep(20 * time.Second)
		synctest.Wait()
		stop(t, old)
		stop(t, updated)

		r.mu.Lock()
		defer r.mu.Unlock()
		ran := map[time.Duration]int{}
		for _, run := range r.all {
			ran[run.slot.Sub(t0)]++
		}
		for at, n := range ran {
			if n != 1 {
				t.Errorf("slot +%v ran %d times", at, n)
			}
			// Occurrences written before the deploy (up to fireAhead) still run.
			if at > deployed.Sub(t0)+2*time.Second && at%(3*time.Second) != 0 {
				t.Errorf("slot +%v of the old spec ran after the new one was registered", at)
			}
		}
		for at := 15 * time.Second; at <= 27*time.Second; at += 3 * time.Second {
			if ran[at] != 1 {
				t.Errorf("slot +%v of the new spec ran %d times, want once", at, ran[at])
			}
		}
	})
}
