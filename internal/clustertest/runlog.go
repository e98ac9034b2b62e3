package clustertest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
	"time"
)

// The events of the run log.
const (
	EventStart = "start" // a handler was called
	EventEnd   = "end"   // a handler returned
)

// The results of an end entry.
const (
	ResultOK        = "ok"        // the handler returned nil: its effect happened
	ResultErr       = "err"       // the handler returned an error of its own
	ResultCancelled = "cancelled" // the handler saw its context end and returned its error
)

// Entry is one line of the run log.
type Entry struct {
	Event       string    `json:"event"` // EventStart or EventEnd
	Node        string    `json:"node"`
	PID         int       `json:"pid"`
	TaskID      int64     `json:"task_id"`
	Name        string    `json:"name,omitempty"` // the task's name (its handler)
	Key         string    `json:"key"`
	ExecutionID string    `json:"execution_id"`
	Attempt     int       `json:"attempt"`
	At          time.Time `json:"at"` // the wall time of the event
	// Result is how the handler ended (end entries): ResultOK, ResultErr or
	// ResultCancelled. At is then the moment the handler decided it, before its
	// last check of its context.
	Result string `json:"result,omitempty"`
	// CtxDone says the handler's context had already ended when it was called (start
	// entries): it returned at once, without an effect.
	CtxDone bool   `json:"ctx_done,omitempty"`
	Err     string `json:"err,omitempty"`
	// ClaimedAt is the claim of the task that this execution started from, by the
	// store's clock (start entries; Task.DispatchedAt as the handler received it).
	ClaimedAt time.Time `json:"claimed_at,omitzero"`
}

// RunLog appends entries to a run log file: each entry is one line written by one
// write(2) on a file opened with O_APPEND, so that a process killed at any moment
// leaves only whole lines, and several processes may share the file.
type RunLog struct {
	mu sync.Mutex
	f  *os.File
}

// OpenRunLog opens (creating it if need be) the run log at path for appending.
func OpenRunLog(path string) (*RunLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("clustertest: open run log: %w", err)
	}
	return &RunLog{f: f}, nil
}

// Write appends e as one line.
func (l *RunLog) Write(e Entry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("clustertest: run log: %w", err)
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.f.Write(b) // one write: O_APPEND makes it one line at the end
	if err == nil && n != len(b) {
		err = fmt.Errorf("short write (%d of %d bytes)", n, len(b))
	}
	if err != nil {
		return fmt.Errorf("clustertest: run log: %w", err)
	}
	return nil
}

// Close closes the file.
func (l *RunLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}

// ReadRunLog reads the run logs at paths, in order of their entries' times. A path
// that does not exist holds no entries (a process that never ran a handler); a last
// line without its newline is one still being written (a reader may see part of a
// write), or cut by a kill, and is left out; any other line that does not parse is an
// error.
func ReadRunLog(paths ...string) ([]Entry, error) {
	var all []Entry
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("clustertest: read run log: %w", err)
		}
		b = b[:bytes.LastIndexByte(b, '\n')+1] // whole lines only
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for n := 1; sc.Scan(); n++ {
			var e Entry
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				return nil, fmt.Errorf("clustertest: run log %s:%d: %w (%q)", p, n, err, sc.Text())
			}
			all = append(all, e)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("clustertest: read run log %s: %w", p, err)
		}
	}
	slices.SortStableFunc(all, func(a, b Entry) int { return a.At.Compare(b.At) })
	return all, nil
}
