package childproc

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// start runs the test binary as a child playing part (see runChild).
func start(t *testing.T, part string, opts Options) *Process {
	t.Helper()
	opts.Env = append(opts.Env, childEnv+"="+part)
	p, err := Start(TestCommand("TestNothing"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := p.Kill(); err != nil {
			t.Error(err)
		}
		<-p.Done()
	})
	return p
}

// TestNothing is what TestCommand names; the children never get to run it.
func TestNothing(t *testing.T) {}

func TestLinesBothWays(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	var exitSeen bool
	p := start(t, "echo", Options{Name: "echo", Stdin: true,
		OnLine: func(l Line) { mu.Lock(); seen = append(seen, l.Text); mu.Unlock() },
		OnExit: func(err error) { mu.Lock(); exitSeen = err == nil; mu.Unlock() },
	})
	if _, err := p.WaitLine(10*time.Second, "READY"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"a", "b c"} {
		if err := p.Send(s); err != nil {
			t.Fatal(err)
		}
	}
	l, err := p.WaitLine(10*time.Second, "ECHO")
	if err != nil || l.Text != "ECHO a" || !slices.Equal(l.Fields, []string{"ECHO", "a"}) || l.Received.IsZero() {
		t.Fatalf("WaitLine(ECHO) = %+v, %v; want ECHO a", l, err)
	}
	// Consumed: the next wait finds the next line.
	if l, err := p.WaitLine(10*time.Second, "NOPE", "ECHO"); err != nil || l.Text != "ECHO b c" {
		t.Fatalf("WaitLine(NOPE, ECHO) = %+v, %v; want ECHO b c", l, err)
	}
	// WaitFor looks at every line, consumed or not.
	if l, err := p.WaitFor(10*time.Second, "READY", func(l Line) bool { return l.Text == "READY" }); err != nil || l.Text != "READY" {
		t.Fatalf("WaitFor(READY) = %+v, %v", l, err)
	}
	if err := p.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the child did not exit after its stdin closed")
	}
	if exited, err := p.Exited(); !exited || err != nil {
		t.Errorf("Exited() = %v, %v; want true, nil", exited, err)
	}
	if _, ok := p.DiedAt(); !ok {
		t.Error("DiedAt() = false after the exit")
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"READY", "ECHO a", "ECHO b c", "BYE"}
	if !slices.Equal(seen, want) || !exitSeen {
		t.Errorf("OnLine saw %q, OnExit a clean exit: %v; want %q, true", seen, exitSeen, want)
	}
	var texts []string
	for _, l := range p.Lines() {
		texts = append(texts, l.Text)
	}
	if !slices.Equal(texts, want) {
		t.Errorf("Lines() = %q, want %q", texts, want)
	}
	if got := p.Stderr(); got != "echo: on stderr\n" {
		t.Errorf("Stderr() = %q", got)
	}
}

func TestWaitLineEndsOnErrorLine(t *testing.T) {
	t.Parallel()
	p := start(t, "fail", Options{Name: "failing"})
	_, err := p.WaitLine(10*time.Second, "READY")
	if err == nil || !strings.Contains(err.Error(), "failing") || !strings.Contains(err.Error(), "ERROR boom at line two") {
		t.Errorf("WaitLine = %v, want the child's ERROR line", err)
	}
}

func TestWaitLineEndsOnExit(t *testing.T) {
	t.Parallel()
	stderr := t.TempDir() + "/silent.stderr"
	p := start(t, "silent", Options{StderrFile: stderr})
	_, err := p.WaitLine(10*time.Second, "READY")
	if err == nil || !strings.Contains(err.Error(), "exited (exit status 3) before printing") || !strings.Contains(err.Error(), stderr) {
		t.Errorf("WaitLine = %v, want the exit, status 3, and the stderr file", err)
	}
	if _, err := p.WaitLine(10*time.Millisecond, "READY"); err == nil {
		t.Error("WaitLine after the exit = nil error")
	}
}

func TestWaitLineTimesOut(t *testing.T) {
	t.Parallel()
	p := start(t, "echo", Options{Stdin: true})
	if _, err := p.WaitLine(50*time.Millisecond, "NEVER"); err == nil || !strings.Contains(err.Error(), "within 50ms") {
		t.Errorf("WaitLine = %v, want a timeout", err)
	}
}

// Kill returns once the child is reaped, though its lines wait for an OnLine that
// blocks.
func TestKillWhileOnLineBlocks(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var once sync.Once
	blocked := make(chan struct{})
	p := start(t, "tick", Options{OnLine: func(Line) {
		once.Do(func() { close(blocked) })
		<-release
	}})
	<-blocked
	at, err := p.Kill()
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	<-p.Done()
	exited, err := p.Exited()
	if !exited || err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Exited() = %v, %v; want true, killed", exited, err)
	}
	if died, ok := p.DiedAt(); !ok || died.Before(at) {
		t.Errorf("DiedAt() = %v, %v; want after the kill at %v", died, ok, at)
	}
	if _, err := p.Kill(); err != nil { // a second time: nothing to do
		t.Errorf("Kill again: %v", err)
	}
}

func TestTerm(t *testing.T) {
	t.Parallel()
	p := start(t, "tick", Options{})
	if _, err := p.WaitLine(10*time.Second, "READY"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Term(); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if _, err := p.Exited(); err == nil || !strings.Contains(err.Error(), "terminated") {
		t.Errorf("Exited() error = %v, want terminated", err)
	}
}

func TestFailures(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 5000)
	for _, c := range []struct {
		stderr string
		want   []string
	}{
		{"", nil},
		{"level=WARN msg=slow\n", nil},
		{"log\nWARNING: DATA RACE\nRead at …\n", []string{"WARNING: DATA RACE\nRead at …\n"}},
		{"panic: boom\n\ngoroutine 1\nfatal error: all goroutines are asleep\n", []string{
			"panic: boom\n\ngoroutine 1\nfatal error: all goroutines are asleep\n", "fatal error: all goroutines are asleep\n"}},
		{"panic: " + long, []string{("panic: " + long)[:4000]}},
	} {
		if got := Failures(c.stderr); !slices.Equal(got, c.want) {
			t.Errorf("Failures(%.40q) = %.80q, want %.80q", c.stderr, got, c.want)
		}
	}
}
