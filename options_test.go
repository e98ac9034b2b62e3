package ax_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax"
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
	if err := s.Every("job", time.Hour, ax.WithMaxRetry(2), backoff, ax.WithTimeout(time.Minute), ax.WithPayload([]byte("p"))); err != nil {
		t.Errorf("Every with shared options: %v", err)
	}
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
