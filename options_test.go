package ax_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store/memory"
)

// Options shared by several targets work on each of them.
func TestSharedOptionsWorkOnEveryTarget(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, openSQLite(t), nil)
	backoff := ax.WithBackoff(func(int) time.Duration { return time.Second })
	s.HandleFunc("job", func(context.Context, *ax.Task) error { return nil },
		ax.WithMaxRetry(7), backoff, ax.WithTimeout(time.Minute))
	ctx := context.Background()
	task, err := s.Delay(ctx, "job", "k", time.Hour, ax.WithMaxRetry(3), backoff, ax.WithTimeout(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if task.MaxRetry != 3 || task.Timeout != 2*time.Minute || len(task.Backoff) != 3 {
		t.Errorf("Delay with shared options: MaxRetry %d, Timeout %v, %d stored delays; want 3, 2m, 3", task.MaxRetry, task.Timeout, len(task.Backoff))
	}
	// Without options of its own, a task takes the handler's MaxRetry (its timeout
	// and backoff stay the handler's, applied when it runs: retry_test checks those).
	plain, err := s.Delay(ctx, "job", "plain", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if plain.MaxRetry != 7 || plain.Timeout != 0 || len(plain.Backoff) != 0 {
		t.Errorf("Delay without options: MaxRetry %d, Timeout %v, %d stored delays; want the handler's 7, 0, 0", plain.MaxRetry, plain.Timeout, len(plain.Backoff))
	}

	// A schedule's occurrences carry its options.
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		t0 := time.Now() // a slot of every 10s
		s := newScheduler(t, st, nil)
		s.HandleFunc("job", func(context.Context, *ax.Task) error { return nil })
		if err := s.Every("job", 10*time.Second, ax.WithMaxRetry(2), backoff, ax.WithTimeout(time.Minute), ax.WithPayload([]byte("p"))); err != nil {
			t.Fatalf("Every with shared options: %v", err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(9 * time.Second) // the +10s occurrence is written
		synctest.Wait()
		occ, err := s.Lookup(context.Background(), "job", slotKey(t0.Add(10*time.Second)))
		if err != nil {
			t.Fatal(err)
		}
		if occ.MaxRetry != 2 || occ.Timeout != time.Minute || len(occ.Backoff) != 2 || string(occ.Payload) != "p" {
			t.Errorf("occurrence: MaxRetry %d, Timeout %v, %d stored delays, payload %q; want 2, 1m, 2, \"p\"",
				occ.MaxRetry, occ.Timeout, len(occ.Backoff), occ.Payload)
		}
		stop(t, s)
	})
}

// Each misuse in testdata/misuse fails to compile, with the compiler naming the
// option type that does not fit.
func TestOptionMisuseDoesNotCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a package with the go command")
	}
	t.Parallel()
	f, err := os.Open("testdata/misuse/misuse.go")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var want []int // lines marked MISUSE
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.Contains(sc.Text(), "// MISUSE") {
			want = append(want, n)
		}
	}
	out, err := exec.Command("go", "build", "-o", os.DevNull, "./testdata/misuse").CombinedOutput()
	if err == nil {
		t.Fatal("testdata/misuse compiled; every marked line must be a type error")
	}
	got := map[int]string{}
	for _, m := range regexp.MustCompile(`misuse\.go:(\d+):\d+: (.*)`).FindAllStringSubmatch(string(out), -1) {
		var n int
		for _, c := range m[1] {
			n = n*10 + int(c-'0')
		}
		got[n] = m[2]
	}
	for _, n := range want {
		msg, ok := got[n]
		if !ok {
			t.Errorf("line %d compiled; want a type error\n%s", n, out)
			continue
		}
		if !strings.Contains(msg, "does not implement ax.") {
			t.Errorf("line %d: %s; want an option type mismatch", n, msg)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d errors, want %d (one per marked line):\n%s", len(got), len(want), out)
	}
}
