package cputime

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestStatTicks(t *testing.T) {
	// Fields after the command: state ppid pgrp session tty_nr tpgid flags minflt
	// cminflt majflt cmajflt utime stime cutime cstime …
	const rest = " S 1 1 1 0 -1 4194560 10 20 0 0 7 3 100 200 20 0 1 0"
	for _, c := range []struct {
		stat     string
		prefixes []string
		want     int64
	}{
		{"42 (postgres)" + rest, []string{"postgres"}, 310},
		{"42 (postgres: walwriter)" + rest, []string{"postgres"}, 310},
		{"42 (mariadbd)" + rest, []string{"mysqld", "mariadbd"}, 310},
		{"42 (a) (b))" + rest, []string{"a) (b)"}, 310}, // the last ')' ends the name
		{"42 (redis-server)" + rest, []string{"postgres"}, 0},
		{"42 (postgres)", []string{"postgres"}, 0},       // truncated
		{"42 (postgres) S 1 1", []string{"postgres"}, 0}, // too few fields
		{"42 postgres" + rest, []string{"postgres"}, 0},  // no name
		{"42 (postgres)" + rest, nil, 0},                 // no prefix
	} {
		if got := statTicks(c.stat, c.prefixes); got != c.want {
			t.Errorf("statTicks(%q, %q) = %d, want %d", c.stat, c.prefixes, got, c.want)
		}
	}
}

// Self grows by at least the CPU a busy loop on this goroutine burns.
func TestSelfCountsThisProcess(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		if _, err := Self(); err == nil {
			t.Fatal("Self on a system without getrusage: no error")
		}
		return
	}
	before, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	var spent time.Duration
	for spent < 50*time.Millisecond { // CPU, not wall time: spin until Self says so
		x := 0
		for i := range 1_000_000 {
			x += i
		}
		_ = x
		now, err := Self()
		if err != nil {
			t.Fatal(err)
		}
		spent = now - before
	}
	if spent < 50*time.Millisecond {
		t.Fatalf("Self grew by %v", spent)
	}
}

// Of counts this test binary, found by its own command name.
func TestOfCountsAProcessByName(t *testing.T) {
	b, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		if _, err := Of("x"); err == nil {
			t.Fatal("Of without /proc: no error")
		}
		t.Skip("no /proc here: Of is an error, checked")
	}
	comm := string(b[:len(b)-1])
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	for self < 20*time.Millisecond { // a tick or two of CPU to see
		for i := range 10_000_000 {
			_ = i
		}
		if self, err = Self(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Of(comm)
	if err != nil {
		t.Fatal(err)
	}
	if got < 10*time.Millisecond {
		t.Fatalf("Of(%q) = %v, this process alone has used %v", comm, got, self)
	}
	none, err := Of("ax-no-such-process-name")
	if err != nil || none != 0 {
		t.Fatalf("Of(no such name) = %v, %v; want 0, nil", none, err)
	}
}
