// Package lograte bounds how many log lines of one kind a flood can write: per key (a
// client's address, say), at most one line in each interval is written, and each line
// written says how many lines, of any key, were held back since the one before.
// Memory is bounded too: past a number of keys, the ones not seen for an interval are
// forgotten (looked for at most once an interval), and when none can be, the excess
// shares one key.
package lograte

import (
	"sync"
	"time"
)

// overflow is the key of the lines whose own keys found no room.
const overflow = "\x00overflow"

// Limiter decides which lines are written. Create one with New; it is safe for
// concurrent use.
type Limiter struct {
	every   time.Duration
	maxKeys int
	now     func() time.Time

	mu     sync.Mutex
	last   map[string]time.Time // key → when its last line was written
	held   int                  // lines held back since the last one written
	swept  time.Time            // when forget last ran
	sweeps int                  // how many times it ran, for tests
}

// New returns a Limiter that writes at most one line per key every interval, for at
// most maxKeys keys at once; now is its clock (nil: time.Now).
func New(every time.Duration, maxKeys int, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{every: every, maxKeys: max(maxKeys, 1), now: now, last: make(map[string]time.Time)}
}

// Allow reports whether a line for key may be written now and, if so, how many lines
// were held back since the last one written.
func (l *Limiter) Allow(key string) (ok bool, held int) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	last, seen := l.last[key]
	if !seen && len(l.last) >= l.maxKeys {
		if now.Sub(l.swept) >= l.every { // a flood of new keys costs one sweep an interval
			l.forget(now)
		}
		if len(l.last) >= l.maxKeys {
			key = overflow
			last, seen = l.last[key]
		}
	}
	if seen && now.Sub(last) < l.every {
		l.held++
		return false, 0
	}
	l.last[key] = now
	held, l.held = l.held, 0
	return true, held
}

// forget drops the keys whose last line is an interval old.
func (l *Limiter) forget(now time.Time) {
	l.swept = now
	l.sweeps++
	for k, last := range l.last {
		if now.Sub(last) >= l.every {
			delete(l.last, k)
		}
	}
}
