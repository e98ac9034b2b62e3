//go:build linux

package execute

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/internal/childproc"
	"github.com/axsched/ax/internal/clock"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/memory"
)

// pauseChildEnv marks the process TestPausedHandlerSeesCancel runs as its child.
const pauseChildEnv = "AX_EXECUTE_PAUSE_CHILD"

// The child's timings: its handlers are cancelled once no heartbeat has reached the
// store for pauseBound; the parent stops it for pauseFor; a handler that finds
// more than pauseGap between two of its checks was paused.
const (
	pauseHeartbeat = 10 * time.Millisecond
	pauseBound     = 100 * time.Millisecond
	pauseFor       = 300 * time.Millisecond
	pauseGap       = 250 * time.Millisecond
	pauseHandlers  = 16
)

// TestPausedHandlerSeesCancel: a handler whose process was stopped (SIGSTOP) for longer
// than the self-fencing bound finds its context cancelled at its first check after the
// process resumes: ctx.Err() non-nil and ctx.Done() closed, whichever it calls first.
// That holds whichever goroutine the runtime wakes first, and although the
// self-fencing warning takes 2 ms to log (a logger preempted mid-write). The child
// runs 16 handlers that poll their context every millisecond; the parent stops and
// resumes it until 400 handlers have seen a resume. Before the fix the warning was
// logged between marking the execution fenced and cancelling its context, and a check
// in that window found the context live.
func TestPausedHandlerSeesCancel(t *testing.T) {
	if os.Getenv(pauseChildEnv) != "" {
		pauseChild(t)
		return
	}
	t.Parallel()
	if testing.Short() {
		t.Skip("stops a child process 25 times")
	}
	child, err := childproc.Start(childproc.TestCommand("TestPausedHandlerSeesCancel"), childproc.Options{Env: []string{pauseChildEnv + "=1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		child.Kill()
		<-child.Done()
		if t.Failed() {
			t.Logf("child's stderr:\n%s", child.Stderr())
		}
	}()
	// next returns the child's next line that starts with one of prefixes.
	next := func(prefixes ...string) string {
		t.Helper()
		l, err := child.WaitLine(30*time.Second, prefixes...)
		if err != nil {
			t.Fatal(err)
		}
		return l.Text
	}

	resumes, live, early := 0, 0, 0
	for round := 0; resumes < 400; round++ {
		if round == 100 {
			t.Fatalf("100 rounds gave %d resumes (%d handlers fenced before a pause): the child's handlers are starved", resumes, early)
		}
		next("READY")
		if _, err := child.Stop(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(pauseFor) // the pause itself
		if _, err := child.Cont(); err != nil {
			t.Fatal(err)
		}
		for {
			l := next("RESUME", "EARLY", "DONE")
			if l == "DONE" {
				break
			}
			switch {
			case l == "EARLY":
				early++ // fenced with no pause: a heartbeat starved on a busy machine
			case l == "RESUME live":
				resumes++
				live++
			default:
				resumes++
			}
		}
	}
	t.Logf("%d resumes, %d handlers fenced before a pause", resumes, early)
	if live > 0 {
		t.Errorf("%d of %d handlers found their context live at their first check after a pause past the self-fencing bound", live, resumes)
	}
}

// slowWarnings is a logger that takes 2 ms over the self-fencing warning, as a thread
// preempted while it writes would.
type slowWarnings struct{ slog.Handler }

func (h slowWarnings) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "self-fencing") {
		time.Sleep(2 * time.Millisecond)
	}
	return h.Handler.Handle(ctx, r)
}

// pauseChild is the child of TestPausedHandlerSeesCancel: rounds of pauseHandlers
// handlers that poll their context until they find it cancelled. It prints READY when
// every handler of a round is polling, then, for each handler, RESUME and whether its
// first check after a pause found its context live, or EARLY if it was cancelled with
// no pause, and DONE when the round's handlers have returned.
func pauseChild(t *testing.T) {
	out := childproc.NewWriter(os.Stdout)
	say := func(s string) { out.Printf("%s", s) }
	st := memory.New()
	defer st.Close()
	var polling, returned sync.WaitGroup
	ex := New(Config{
		Store: st, Clock: clock.New(), Log: slog.New(slowWarnings{slog.NewTextHandler(io.Discard, nil)}),
		Node: "child", Concurrency: pauseHandlers, HeartbeatInterval: pauseHeartbeat, MaxDispatchRetries: 3,
		SelfFenceAfter: pauseBound,
		Handler: func(string) *Handler {
			return &Handler{Timeout: time.Hour, Run: func(ctx context.Context, t *store.Task) error {
				defer returned.Done()
				polling.Done()
				doneFirst := t.ID%2 == 0 // half the handlers call Done first, half Err
				last := time.Now()
				for {
					now := time.Now()
					paused := now.Sub(last) > pauseGap
					last = now
					// The first check after the pause: Done and Err, one right after
					// the other, in either order.
					var err error
					var done bool
					if !doneFirst {
						err = ctx.Err()
					}
					select {
					case <-ctx.Done():
						done = true
					default:
					}
					if doneFirst {
						err = ctx.Err()
					}
					switch {
					case paused && (err == nil || !done):
						say("RESUME live")
						return fmt.Errorf("live after a pause")
					case paused:
						say("RESUME cancelled")
						return err
					case err != nil:
						say("EARLY")
						return err
					}
					time.Sleep(time.Millisecond)
				}
			}}
		},
	})
	ex.Start()
	defer ex.Stop(context.Background())
	ctx := context.Background()
	for round := 0; ; round++ {
		nts := make([]store.NewTask, pauseHandlers)
		for i := range nts {
			nts[i] = store.NewTask{Name: "job", Key: fmt.Sprintf("%d-%d", round, i), DueAt: time.Now(), MaxRetry: 0}
		}
		ins, err := st.Insert(ctx, nts)
		if err != nil {
			t.Fatal(err)
		}
		claims := make([]store.Claim, len(ins))
		for i, r := range ins {
			claims[i] = store.Claim{ID: r.Task.ID, ExecutionID: fmt.Sprintf("01900000-0000-7000-8000-%012d", round*pauseHandlers+i)}
		}
		polling.Add(pauseHandlers)
		returned.Add(pauseHandlers)
		claimed, err := st.Claim(ctx, store.Fence{}, claims)
		if err != nil || len(claimed.Claimed) != pauseHandlers {
			t.Fatalf("Claim = %+v, %v", claimed, err)
		}
		ex.Dispatch(nil, claimed.Claimed)
		polling.Wait()
		say("READY")
		returned.Wait()
		say("DONE")
	}
}
