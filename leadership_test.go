package ax_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/elect/sqllease"
	"github.com/axsched/ax/store/memory"
)

// change is what the history tests compare of an ax.LeadershipChange; the reasons are
// checked apart.
type change struct {
	Epoch int64
	Node  string
	Kind  string
}

// history reads s's leadership history and returns it with its changes as compared.
func history(t *testing.T, s *ax.Scheduler) ([]ax.LeadershipChange, []change) {
	t.Helper()
	h, err := s.LeadershipHistory(context.Background(), 20)
	if err != nil {
		t.Fatalf("LeadershipHistory(20) error: %v", err)
	}
	t.Logf("leadership history: %+v", h)
	var got []change
	for _, c := range h {
		if !strings.HasSuffix(c.Holder, c.Node) {
			t.Errorf("change %+v: Node is not the end of Holder", c)
		}
		got = append(got, change{c.Epoch, c.Node, c.Kind})
	}
	return h, got
}

// wantReason fails unless the change's reason mentions every part.
func wantReason(t *testing.T, c ax.LeadershipChange, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(c.Reason, p) {
			t.Errorf("change %d %s of %s: reason %q does not mention %q", c.Epoch, c.Kind, c.Node, c.Reason, p)
		}
	}
}

// TestLeadershipHistoryRecordsAFailover: of two schedulers under one SQL lease, the
// leader stops and the other takes over; the history, read by a third scheduler that
// never leads nor starts, shows the first term, its end (stopping), and the second
// term naming it, newest first; and then the second term's end.
func TestLeadershipHistoryRecordsAFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		s, obs := electedPair(t, st, 2*time.Second, &starts{})
		defer s[0].Stop(context.Background())
		defer s[1].Stop(context.Background())
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		leader := -1
		for i := range obs {
			if obs[i].leading() {
				leader = i
			}
		}
		if leader < 0 {
			t.Fatal("no scheduler leads")
		}
		other := 1 - leader
		a, b := fmt.Sprintf("node-%d", leader), fmt.Sprintf("node-%d", other)
		no := false
		ops, err := ax.New(ax.Config{Store: st, Node: "ops", CanLead: &no, Logger: quietLogger()}) // never started
		if err != nil {
			t.Fatal(err)
		}
		if _, got := history(t, ops); len(got) != 1 || got[0] != (change{1, a, ax.LeadershipAcquired}) {
			t.Fatalf("history while %s leads = %+v, want its term acquired, epoch 1", a, got)
		}

		if err := s[leader].Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		h, got := history(t, ops)
		want := []change{{2, b, ax.LeadershipAcquired}, {1, a, ax.LeadershipEnded}, {1, a, ax.LeadershipAcquired}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("history after the failover = %+v, want %+v", got, want)
		}
		wantReason(t, h[1], "stopping")
		wantReason(t, h[0], a, "epoch 1", "stopping")
		if !h[2].At.Before(h[1].At) || h[0].At.Before(h[1].At) {
			t.Errorf("history times %v, %v, %v: want the end between the two starts", h[2].At, h[1].At, h[0].At)
		}
		if _, fromLeader := history(t, s[other]); fmt.Sprint(fromLeader) != fmt.Sprint(want) {
			t.Errorf("history read by the leader = %+v, want %+v", fromLeader, want)
		}

		if err := s[other].Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		h, got = history(t, ops)
		if len(got) != 4 || got[0] != (change{2, b, ax.LeadershipEnded}) {
			t.Fatalf("history after both stopped = %+v, want the second term ended first", got)
		}
		wantReason(t, h[0], "stopping")
	})
}

// TestLeadershipHistoryOfAFencedLeader: a newer leader records itself while the old one
// still holds its lease (the old one recorded no end: the new term says so); the old
// leader's next claim is fenced and its end, recorded late, sorts with its own term;
// when it leads again, its new term names the one it took over from.
func TestLeadershipHistoryOfAFencedLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		el, err := sqllease.New(st, sqllease.WithTTL(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		obs := &roles{}
		s, err := ax.New(ax.Config{Store: st, Node: "a", Elector: el, Observer: obs, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		s.HandleFunc("job", (&starts{}).handler("a"))
		ctx := context.Background()
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer s.Stop(ctx)
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if !obs.leading() {
			t.Fatal("the only candidate does not lead")
		}
		if _, err := st.RaiseFence(ctx, ax.DefaultNamespace, "usurper", 100); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Delay(ctx, "job", "k", 500*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second) // fenced at its claim; leads again once it can
		synctest.Wait()
		h, got := history(t, s)
		want := []change{{101, "a", ax.LeadershipAcquired}, {100, "usurper", ax.LeadershipAcquired},
			{1, "a", ax.LeadershipEnded}, {1, "a", ax.LeadershipAcquired}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("history = %+v, want %+v", got, want)
		}
		wantReason(t, h[1], "a", "epoch 1", "no end")
		wantReason(t, h[2], "fenced")
		wantReason(t, h[0], "usurper", "epoch 100", "no end")
	})
}

func TestLeadershipHistoryInvalid(t *testing.T) {
	t.Parallel()
	st := memory.New()
	defer st.Close()
	s, err := ax.New(ax.Config{Store: st, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := s.LeadershipHistory(t.Context(), 20); err != nil || len(h) != 0 {
		t.Errorf("LeadershipHistory without an Elector = %+v, %v, want none", h, err)
	}
	for _, n := range []int{0, ax.MaxLeadershipHistory + 1} {
		if _, err := s.LeadershipHistory(t.Context(), n); !errors.Is(err, ax.ErrInvalid) {
			t.Errorf("LeadershipHistory(%d) error %v, want ErrInvalid", n, err)
		}
	}
}
