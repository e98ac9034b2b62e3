package ax_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store/memory"
	"github.com/axsched/ax/store/sqlite"
)

// A schedule lives through normal fires, an overlap skip, a manual trigger, three
// outages (one per misfire policy) and a pause: ScheduleSlots then accounts for every
// slot since it was stored, on the memory store and on SQLite.
func TestScheduleSlotsAccountForEverySlot(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) ax.Store
	}{
		{"memory", func(t *testing.T) ax.Store { return memory.New() }},
		{"sqlite", func(t *testing.T) ax.Store {
			st, err := sqlite.Open(filepath.Join(t.TempDir(), "ax.db"))
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := tc.open(t)
				defer st.Close()
				ctx := context.Background()
				t0 := time.Now() // 2000-01-01T00:00:00Z: a slot of every minute
				at := func(min float64) time.Time { return t0.Add(time.Duration(min * float64(time.Minute))) }
				until := func(min float64) { time.Sleep(time.Until(at(min))) }
				r := newRuns()
				h := r.handler(func(key string) time.Duration {
					if key == slotKey(at(3)) {
						return 90 * time.Second // slot 4 comes due while it runs: skipped
					}
					return time.Second
				})
				start := func(misfire ax.MisfirePolicy, maxCatchUp int) *ax.Scheduler {
					return startScheduler(t, st, ax.Config{MaxCatchUp: maxCatchUp}, "strip", h, func(s *ax.Scheduler) error {
						return s.Every("strip", time.Minute, ax.WithMisfire(misfire))
					})
				}

				s := start(ax.MisfireSkip, 0)
				until(5.5)
				if _, err := s.TriggerSchedule(ctx, "strip"); err != nil {
					t.Fatalf("TriggerSchedule: %v", err)
				}
				until(6.5)
				stop(t, s)
				until(10.5) // down: slots 7-10 missed; the restart skips them
				s = start(ax.MisfireSkip, 0)
				until(13.5)
				stop(t, s)
				until(17.5) // down: slots 14-17 missed; the restart fires 17
				s = start(ax.MisfireFireOnce, 0)
				until(19.5)
				if err := s.PauseSchedule(ctx, "strip"); err != nil {
					t.Fatalf("PauseSchedule: %v", err)
				}
				until(23.5) // paused: slots 20-23
				if err := s.ResumeSchedule(ctx, "strip"); err != nil {
					t.Fatalf("ResumeSchedule: %v", err)
				}
				until(25.5)
				stop(t, s)
				until(29.5) // down: slots 26-29 missed; the restart catches up 28 and 29
				s = start(ax.MisfireCatchUp, 2)
				until(31.5)
				synctest.Wait()
				defer stop(t, s)

				got, err := s.ScheduleSlots(ctx, "strip", 100)
				if err != nil {
					t.Fatalf("ScheduleSlots: %v", err)
				}
				type want struct {
					state  ax.SlotState
					result string
				}
				slot := func(s ax.SlotState) want { return want{state: s} }
				missed := func(result string) want { return want{ax.SlotMissed, result} }
				wants := map[int]want{
					4: {ax.SlotSkipped, `skipped: task key "strip" held by task`},
					7: missed("skipped"), 8: missed("skipped"), 9: missed("skipped"), 10: missed("skipped"),
					14: missed("fired the last one"), 15: missed("fired the last one"), 16: missed("fired the last one"),
					20: {ax.SlotPaused, "not fired: paused"}, 21: {ax.SlotPaused, "not fired: paused"},
					22: {ax.SlotPaused, "not fired: paused"}, 23: {ax.SlotPaused, "not fired: paused"},
					26: missed("caught up 2, the most recent"), 27: missed("caught up 2, the most recent"),
				}
				for _, m := range []int{1, 2, 3, 5, 6, 11, 12, 13, 17, 18, 19, 24, 25, 28, 29, 30, 31} {
					wants[m] = slot(ax.SlotSucceeded)
				}
				var regular, manual []ax.Slot
				for _, sl := range got {
					if sl.Manual {
						manual = append(manual, sl)
					} else {
						regular = append(regular, sl)
					}
				}
				if len(regular) != 31 {
					t.Errorf("ScheduleSlots returned %d slots, want the 31 since the schedule was stored:\n%s", len(regular), slotList(got))
				}
				for i, sl := range regular {
					min := 31 - i
					w := wants[min]
					if !sl.At.Equal(at(float64(min))) {
						t.Errorf("slot %d is at %v, want %v (newest first)", i, sl.At, at(float64(min)))
						continue
					}
					if sl.State == ax.SlotUnknown {
						t.Errorf("slot +%dm is not accounted for: %+v", min, sl)
					}
					if sl.State != w.state || (w.result != "" && !strings.HasPrefix(sl.Result, w.result)) {
						t.Errorf("slot +%dm = %s %q, want %s %q", min, sl.State, sl.Result, w.state, w.result)
					}
					if (sl.State == ax.SlotSucceeded || sl.State == ax.SlotSkipped) && (sl.TaskID == 0 || sl.Attempt != 0) {
						t.Errorf("slot +%dm has task %d attempt %d, want its occurrence's, first attempt", min, sl.TaskID, sl.Attempt)
					}
					if sl.State == ax.SlotSucceeded && min != 17 && min != 28 && min != 29 && (sl.Lateness < 0 || sl.Lateness > 50*time.Millisecond) {
						t.Errorf("slot +%dm lateness %v, want on time", min, sl.Lateness)
					}
				}
				if len(manual) != 1 || !manual[0].At.Equal(at(5.5)) || manual[0].State != ax.SlotSucceeded || manual[0].TaskID == 0 {
					t.Errorf("manual entries = %+v, want one at +5m30s, succeeded", manual)
				}
				// Newest first, the manual one among the slots.
				for i := 1; i < len(got); i++ {
					if got[i].At.After(got[i-1].At) {
						t.Errorf("entry %d (%v) is newer than entry %d (%v)", i, got[i].At, i-1, got[i-1].At)
					}
				}
				// A short strip: the newest n.
				if few, err := s.ScheduleSlots(ctx, "strip", 3); err != nil || len(few) != 3 || !few[0].At.Equal(at(31)) || !few[2].At.Equal(at(29)) {
					t.Errorf("ScheduleSlots(3) = %s, %v; want slots 31, 30, 29", slotList(few), err)
				}
			})
		})
	}
}

func slotList(slots []ax.Slot) string {
	var out string
	for _, s := range slots {
		out += fmt.Sprintf("%s %s manual=%v task=%d %q\n", s.At.Format("15:04:05"), s.State, s.Manual, s.TaskID, s.Result)
	}
	return out
}

// Slots whose occurrences retention deleted are Pruned; slots of a schedule paused
// now are Paused before any resume; slots no scheduler has come to are Missed.
func TestScheduleSlotsPrunedPausedAndNotFired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		ctx := context.Background()
		t0 := time.Now()
		at := func(min float64) time.Time { return t0.Add(time.Duration(min * float64(time.Minute))) }
		r := newRuns()
		keep := ax.Keep{For: 5 * time.Minute}
		cfg := ax.Config{Retention: ax.Retention{Succeeded: keep, Failed: keep, Cancelled: keep, Interval: time.Minute}}
		s := startScheduler(t, st, cfg, "strip", r.handler(func(string) time.Duration { return time.Second }),
			func(s *ax.Scheduler) error { return s.Every("strip", time.Minute) })
		time.Sleep(time.Until(at(12.5)))
		if err := s.PauseSchedule(ctx, "strip"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(at(15.5)))
		synctest.Wait()
		stop(t, s)

		got, err := s.ScheduleSlots(ctx, "strip", 100)
		if err != nil {
			t.Fatalf("ScheduleSlots: %v", err)
		}
		if len(got) != 15 {
			t.Fatalf("ScheduleSlots returned %d slots, want 15:\n%s", len(got), slotList(got))
		}
		for i, sl := range got {
			min := 15 - i
			want := ax.SlotSucceeded
			switch {
			case min >= 13:
				want = ax.SlotPaused
			case min < 9: // finished more than 5 minutes before the last round, at +15m
				want = ax.SlotPruned
			case min < 11: // pruned or not, by where the rounds fell
				if sl.State == ax.SlotPruned {
					want = ax.SlotPruned
				}
			}
			if sl.State != want || !sl.At.Equal(at(float64(min))) {
				t.Errorf("slot +%dm = %s at %v, want %s", min, sl.State, sl.At, want)
			}
		}

		// Resumed by a scheduler that then stops: the slots since are not fired yet.
		s = startScheduler(t, st, ax.Config{}, "strip", r.handler(func(string) time.Duration { return time.Second }),
			func(s *ax.Scheduler) error { return s.Every("strip", time.Minute) })
		if err := s.ResumeSchedule(ctx, "strip"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(at(16.5)))
		synctest.Wait()
		stop(t, s)
		time.Sleep(time.Until(at(19.5)))
		got, err = s.ScheduleSlots(ctx, "strip", 5)
		if err != nil {
			t.Fatalf("ScheduleSlots: %v", err)
		}
		want := []ax.SlotState{ax.SlotMissed, ax.SlotMissed, ax.SlotMissed, ax.SlotSucceeded, ax.SlotPaused}
		for i, sl := range got {
			if sl.State != want[i] {
				t.Errorf("after the resume and a stop, slot %v = %s %q, want %s", sl.At.Sub(t0), sl.State, sl.Result, want[i])
			}
		}
		if len(got) != len(want) {
			t.Errorf("ScheduleSlots(5) returned %d slots:\n%s", len(got), slotList(got))
		}
		if _, err := s.ScheduleSlots(ctx, "nope", 5); !errors.Is(err, ax.ErrNotFound) {
			t.Errorf("ScheduleSlots(unknown) error %v, want ErrNotFound", err)
		}
		for _, n := range []int{0, ax.MaxScheduleSlots + 1} {
			if _, err := s.ScheduleSlots(ctx, "strip", n); !errors.Is(err, ax.ErrInvalid) {
				t.Errorf("ScheduleSlots(n %d) error %v, want ErrInvalid", n, err)
			}
		}
	})
}
