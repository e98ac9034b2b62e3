package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/internal/childproc"
)

// The values of Pickup's from: where its tasks are submitted.
const (
	FromHere  = "here"  // by the scheduler that runs them
	FromOther = "other" // by a second process that only submits
)

// SubmitterEnv is the environment variable that carries a submitter process's
// SubmitterConfig, as JSON, from Pickup to the process that Env.Submitter starts.
const SubmitterEnv = "AX_BENCH_SUBMITTER"

// SubmitterConfig is what the pickup workload's second process does: open the store
// of kind Store at DSN, already migrated, and submit Tasks tasks due now, one at a
// time, Rate a second.
type SubmitterConfig struct {
	Store string `json:"store"` // sqlite, postgres or mysql: Env.Name
	DSN   string `json:"dsn"`   // Env.DSN
	Tasks int    `json:"tasks"`
	Rate  int    `json:"rate"`
}

// SubmitterStore is the store a submitter process opened.
type SubmitterStore struct {
	Store ax.Store
	// Statements, when set, returns how many statements the store sent so far
	// (Env.Statements). Nil where the running process's count sees them already (a
	// MariaDB server's Questions) or nothing counts them (SQLite).
	Statements func() (int64, error)
	Close      func()
}

// Opener opens the store of kind at dsn for a submitter process.
type Opener func(ctx context.Context, kind, dsn string) (SubmitterStore, error)

// submitted is one task's Submit call: when it began and when it returned.
type submitted struct {
	called, returned time.Time
}

// Pickup submits n tasks due now (Delay with no delay), one at a time, rate a second,
// to a scheduler at its defaults whose handler records its start, and measures for
// each task how long after its Submit returned (the commit acknowledged) its handler
// started. From FromHere, the running scheduler submits them. From FromOther, a
// second process does (Env.Submitter): a producer that runs no scheduler, as a web
// process that only submits would; the running scheduler learns of its tasks from
// the store's notification where the store has one, else from its refill. The
// second process's store calls and statements are added to the run's.
func Pickup(ctx context.Context, env Env, n, rate int, from string) (Result, error) {
	switch {
	case n < 1 || rate < 1:
		return Result{}, fmt.Errorf("bench: pickup: %d tasks at %d/s: want at least 1 of each", n, rate)
	case from != FromHere && from != FromOther:
		return Result{}, fmt.Errorf("bench: pickup: from %q: want %s or %s", from, FromHere, FromOther)
	case from == FromOther && (env.Submitter == nil || env.DSN == ""):
		return Result{}, fmt.Errorf("bench: pickup from another process: the Env has no Submitter or DSN")
	}
	var (
		mu      sync.Mutex
		starts  = make([]time.Time, n)
		runs    = make([]int, n)
		started int
		early   int
		done    = make(chan struct{})
	)
	m, menv := newMeter(env)
	s, err := newScheduler(menv, 0)
	if err != nil {
		return Result{}, err
	}
	s.HandleFunc("bench.noop", func(_ context.Context, t *ax.Task) error {
		now := time.Now()
		i, err := strconv.Atoi(t.Key)
		if err != nil || i < 0 || i >= n {
			return fmt.Errorf("bench: pickup: a task of key %q", t.Key)
		}
		mu.Lock()
		defer mu.Unlock()
		if now.Before(t.DueAt) {
			early++
		}
		if runs[i]++; runs[i] == 1 {
			starts[i] = now
			if started++; started == n {
				close(done)
			}
		}
		return nil
	})
	if err := s.Start(ctx); err != nil {
		return Result{}, err
	}
	stop := func() error {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		return s.Stop(stopCtx)
	}
	var sub []submitted
	var theirs reading // the second process's store calls and statements
	if from == FromHere {
		sub = make([]submitted, n)
		if err = m.start(); err == nil {
			err = pace(ctx, n, rate, func(i int) error {
				called := time.Now()
				_, err := s.Delay(ctx, "bench.noop", strconv.Itoa(i), 0)
				sub[i] = submitted{called, time.Now()}
				return err
			})
		}
	} else {
		sub, theirs, err = submitFromProcess(ctx, env, n, rate, m.start)
	}
	if err != nil {
		stop()
		return Result{}, err
	}
	// Every task submitted: each starts within a refill interval at most.
	select {
	case <-done:
	case <-time.After(time.Minute):
		stop()
		mu.Lock()
		defer mu.Unlock()
		return Result{}, fmt.Errorf("bench: pickup: %d of %d tasks started a minute after the last submit", started, n)
	case <-ctx.Done():
		stop()
		return Result{}, ctx.Err()
	}
	if err := stop(); err != nil {
		return Result{}, err
	}
	if err := checkSucceeded(ctx, env.Store, n); err != nil {
		return Result{}, err
	}
	mu.Lock()
	defer mu.Unlock()
	for i, k := range runs {
		if k != 1 {
			return Result{}, fmt.Errorf("bench: pickup: task %d ran %d times", i, k)
		}
	}
	pickup := make([]time.Duration, n)
	trips := make([]time.Duration, n)
	for i := range n {
		pickup[i] = starts[i].Sub(sub[i].returned) // monotonic here, wall clock from another process
		trips[i] = sub[i].returned.Sub(sub[i].called)
	}
	slices.Sort(pickup)
	slices.Sort(trips)
	pct := func(d []time.Duration, p float64) time.Duration { return d[min(int(p*float64(n)), n-1)] }
	first, last := sub[0].called, sub[n-1].returned
	end := slices.MaxFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	r := Result{
		Workload: "pickup", Store: env.Name, Tasks: n, Elapsed: end.Sub(first), Early: early,
		From: from, SubmitRate: rate, PickupP50: pct(pickup, 0.50), PickupP95: pct(pickup, 0.95),
		PickupP99: pct(pickup, 0.99), PickupMax: pickup[n-1], SubmitP50: pct(trips, 0.50),
	}
	if span := last.Sub(first); span > 0 {
		r.PerSec = float64(n) / span.Seconds()
	}
	if err := m.stop(&r); err != nil {
		return Result{}, err
	}
	r.CallsPerTask += float64(theirs.calls) / float64(n)
	r.StmtsPerTask += float64(theirs.stmts) / float64(n)
	return r, nil
}

// pace calls submit(i) for i from 0 to n−1, one at a time, rate a second: the i-th in
// the i-th interval of 1/rate from the start, at a random point of it, so that the
// submits keep no phase with the scheduler's ticks (every 50 ms on the dot would meet
// a 10 ms wheel at the same point of a tick each time). A submit that falls behind is
// followed at once by the next: the rate holds, and never runs ahead.
func pace(ctx context.Context, n, rate int, submit func(i int) error) error {
	interval := time.Second / time.Duration(rate)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	start := time.Now()
	for i := range n {
		at := start.Add(time.Duration(i)*interval + rand.N(interval))
		if d := time.Until(at); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-timer.C:
			}
		}
		if err := submit(i); err != nil {
			return fmt.Errorf("bench: pickup: submit %d: %w", i, err)
		}
	}
	return nil
}

// submitFromProcess runs the pickup workload's second process (Env.Submitter) and
// returns its n submits, with the store calls and statements it counted; begin
// starts the running process's count, just before the second process starts to
// submit.
func submitFromProcess(ctx context.Context, env Env, n, rate int, begin func() error) ([]submitted, reading, error) {
	raw, err := json.Marshal(SubmitterConfig{Store: env.Name, DSN: env.DSN, Tasks: n, Rate: rate})
	if err != nil {
		return nil, reading{}, fmt.Errorf("bench: %w", err)
	}
	cmd, err := env.Submitter()
	if err != nil {
		return nil, reading{}, err
	}
	p, err := childproc.Start(cmd, childproc.Options{Name: "submitter", Env: []string{SubmitterEnv + "=" + string(raw)}, Stdin: true})
	if err != nil {
		return nil, reading{}, fmt.Errorf("bench: %w", err)
	}
	defer p.Kill() // a child already reaped is left alone
	if _, err := p.WaitLine(time.Minute, "READY"); err != nil {
		return nil, reading{}, fmt.Errorf("bench: %w", err)
	}
	if err := begin(); err != nil {
		return nil, reading{}, err
	}
	if err := p.Send("GO"); err != nil {
		return nil, reading{}, fmt.Errorf("bench: %w", err)
	}
	line, err := p.WaitLine(time.Duration(n/rate)*time.Second+time.Minute, "DONE")
	if err != nil {
		return nil, reading{}, fmt.Errorf("bench: %w", err)
	}
	select { // it closes its store and exits
	case <-p.Done():
	case <-time.After(time.Minute):
	}
	if exited, err := p.Exited(); !exited || err != nil {
		return nil, reading{}, fmt.Errorf("bench: submitter: after DONE: exited %v (%v); stderr: %s", exited, err, p.Stderr())
	}
	var theirs reading
	if len(line.Fields) == 3 {
		theirs.calls, _ = strconv.Atoi(line.Fields[1])
		theirs.stmts, _ = strconv.ParseInt(line.Fields[2], 10, 64)
	}
	sub := make([]submitted, n)
	got := 0
	for _, l := range p.Lines() {
		f := l.Fields
		if len(f) != 4 || f[0] != "SUBMITTED" {
			continue
		}
		i, err0 := strconv.Atoi(f[1])
		called, err1 := strconv.ParseInt(f[2], 10, 64)
		returned, err2 := strconv.ParseInt(f[3], 10, 64)
		if err0 != nil || err1 != nil || err2 != nil || i < 0 || i >= n || !sub[i].called.IsZero() {
			return nil, reading{}, fmt.Errorf("bench: submitter: bad line %q", l.Text)
		}
		sub[i] = submitted{time.Unix(0, called), time.Unix(0, returned)}
		got++
	}
	if got != n {
		return nil, reading{}, fmt.Errorf("bench: submitter: %d of %d submits reported", got, n)
	}
	return sub, theirs, nil
}

// RunSubmitterFromEnv runs the submitter process that SubmitterEnv describes (see
// RunSubmitter), with stdin and stdout as its channel to the parent.
func RunSubmitterFromEnv(ctx context.Context, open Opener) error {
	raw := os.Getenv(SubmitterEnv)
	if raw == "" {
		return fmt.Errorf("ax: bench: submitter: %s is not set; this mode is started by `ax bench --workload pickup --from other` only", SubmitterEnv)
	}
	var cfg SubmitterConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return fmt.Errorf("ax: bench: submitter: parse %s: %w", SubmitterEnv, err)
	}
	return RunSubmitter(ctx, cfg, open, os.Stdin, os.Stdout)
}

// RunSubmitter is the pickup workload's second process: it opens the store with open
// and an ax.Scheduler on it that it never starts (it submits only), prints READY,
// waits for GO on stdin, submits cfg.Tasks tasks due now at cfg.Rate a second (keys
// 0, 1, …), and then prints one line per submit and one for the counts:
//
//	SUBMITTED <key> <call unix-nanos> <return unix-nanos>
//	DONE <store calls> <statements>
//	ERROR <message>                   the submitter failed
//
// The lines come after the submits, so that writing them costs the run nothing.
func RunSubmitter(ctx context.Context, cfg SubmitterConfig, open Opener, stdin io.Reader, stdout io.Writer) error {
	out := childproc.NewWriter(stdout)
	if cfg.Tasks < 1 || cfg.Rate < 1 {
		return fmt.Errorf("ax: bench: submitter: %d tasks at %d/s", cfg.Tasks, cfg.Rate)
	}
	st, err := open(ctx, cfg.Store, cfg.DSN)
	if err != nil {
		return fmt.Errorf("ax: bench: submitter: %w", err)
	}
	defer st.Close()
	m, env := newMeter(Env{Store: st.Store, Statements: st.Statements})
	s, err := ax.New(ax.Config{Store: env.Store, Logger: quiet(), OwnerService: "ax-bench"})
	if err != nil {
		return err
	}
	out.Printf("READY")
	sc := bufio.NewScanner(stdin)
	if !sc.Scan() || strings.TrimSpace(sc.Text()) != "GO" {
		return fmt.Errorf("ax: bench: submitter: stdin closed or no GO (%q)", sc.Text())
	}
	if err := m.start(); err != nil {
		return err
	}
	sub := make([]submitted, cfg.Tasks)
	err = pace(ctx, cfg.Tasks, cfg.Rate, func(i int) error {
		called := time.Now()
		_, err := s.Delay(ctx, "bench.noop", strconv.Itoa(i), 0)
		sub[i] = submitted{called, time.Now()}
		return err
	})
	if err != nil {
		return err
	}
	d, err := m.since()
	if err != nil {
		return err
	}
	for i, x := range sub {
		out.Printf("SUBMITTED %d %d %d", i, x.called.UnixNano(), x.returned.UnixNano())
	}
	out.Printf("DONE %d %d", d.calls, d.stmts)
	return nil
}

// SubmitterCommand is the usual Env.Submitter: this program re-executed with args.
func SubmitterCommand(args ...string) func() (*exec.Cmd, error) {
	return func() (*exec.Cmd, error) {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("bench: submitter: %w", err)
		}
		return exec.Command(exe, args...), nil
	}
}
