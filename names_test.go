package ax_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store/memory"
)

// A paused name's tasks wait, through a restart, while other names run; resumed,
// they run in due order. The pause is the store's: a scheduler that did not pause the
// name honours it.
func TestPauseNameHoldsItsTasks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		var mu sync.Mutex
		var ran []string
		handle := func(ctx context.Context, task *ax.Task) error {
			mu.Lock()
			ran = append(ran, task.Name+"/"+task.Key)
			mu.Unlock()
			return nil
		}
		ops := newScheduler(t, st, nil) // an operations node: not started
		ctx := context.Background()
		paused, err := ops.PauseName(ctx, "report", ax.WithActor("alice"))
		if err != nil || !paused.Paused || paused.ChangedBy != "alice" {
			t.Fatalf("PauseName = %+v, %v; want paused by alice", paused, err)
		}
		first := newScheduler(t, st, nil)
		first.HandleFunc("report", handle)
		first.HandleFunc("mail", handle)
		if err := first.Start(ctx); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"c", "a", "b"} { // submitted c, a, b; due a, b, c
			delay := map[string]time.Duration{"a": time.Second, "b": 2 * time.Second, "c": 3 * time.Second}[key]
			if _, err := first.Delay(ctx, "report", key, delay); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := first.Delay(ctx, "mail", "m", time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := first.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if len(ran) != 1 || ran[0] != "mail/m" {
			t.Errorf("ran %v while report was paused, want only mail/m", ran)
		}
		ran = nil
		mu.Unlock()

		// A new scheduler on the store: the pause holds.
		second := newScheduler(t, st, func(c *ax.Config) { c.Concurrency = 1 }) // one at a time: the order shows
		second.HandleFunc("report", handle)
		if err := second.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer second.Stop(ctx)
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		if len(ran) != 0 {
			t.Errorf("ran %v after a restart, want nothing: the pause is stored", ran)
		}
		mu.Unlock()
		if names, err := second.Names(ctx); err != nil || len(names) != 1 || names[0].Name != "report" || !names[0].Paused {
			t.Errorf("Names = %+v, %v; want report paused", names, err)
		}
		resumed, err := ops.ResumeName(ctx, "report", ax.WithActor("bob"))
		if err != nil || resumed.Paused || resumed.ChangedBy != "bob" {
			t.Fatalf("ResumeName = %+v, %v; want resumed by bob", resumed, err)
		}
		time.Sleep(ax.DefaultRefillInterval + time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if got := len(ran); got != 3 || ran[0] != "report/a" || ran[1] != "report/b" || ran[2] != "report/c" {
			t.Errorf("after the resume ran %v, want report/a, report/b, report/c in due order", ran)
		}
	})
}

// A limit option out of range panics at Handle with an ErrInvalid naming the option,
// and registers nothing; the run-time setters refuse the same values with
// ErrInvalid and store nothing.
func TestLimitsRefuseBadValues(t *testing.T) {
	st := memory.New()
	defer st.Close()
	s := newScheduler(t, st, nil)
	for _, c := range []struct {
		field string
		opt   ax.HandlerOption
	}{
		{"Concurrency", ax.WithConcurrency(0)},
		{"Concurrency", ax.WithConcurrency(ax.MaxConcurrency + 1)},
		{"Rate", ax.WithRate(0, time.Second)},
		{"Rate", ax.WithRate(1, ax.MaxRatePer+1)},
		{"KeyConcurrency", ax.WithKeyConcurrency(0)},
		{"KeyRate", ax.WithKeyRate(ax.MaxRate+1, time.Second)},
		{"KeyRate", ax.WithKeyRate(1, ax.MinRatePer-1)},
	} {
		func() {
			defer func() {
				err, _ := recover().(error)
				if !errors.Is(err, ax.ErrInvalid) || !strings.Contains(err.Error(), c.field) {
					t.Errorf("Handle with a bad %s: panic %v, want an ErrInvalid naming it", c.field, err)
				}
			}()
			s.HandleFunc("report", func(context.Context, *ax.Task) error { return nil }, c.opt)
		}()
	}
	ctx := context.Background()
	for _, err := range []error{
		func() error { _, err := s.SetKeyRate(ctx, "report", -1, time.Second); return err }(),
		func() error { _, err := s.SetKeyRate(ctx, "report", 1, 0); return err }(),
		func() error { _, err := s.SetKeyRate(ctx, "", 1, time.Second); return err }(),
		func() error { _, err := s.SetRate(ctx, "report", 1, ax.MaxRatePer+1); return err }(),
	} {
		if !errors.Is(err, ax.ErrInvalid) {
			t.Errorf("a bad rate: %v, want ErrInvalid", err)
		}
	}
	if names, err := s.Names(ctx); err != nil || len(names) != 0 {
		t.Errorf("Names = %+v, %v; want none stored", names, err)
	}
}
