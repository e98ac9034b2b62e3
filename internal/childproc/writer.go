package childproc

import (
	"fmt"
	"io"
	"strings"
	"sync"
)

// Writer is the child's side: it writes lines to the parent, each in one Write, so
// that the lines of several goroutines never interleave and a child killed at any
// moment leaves only whole lines. Its methods are safe for concurrent use; write
// errors are dropped (a parent that stopped reading is gone).
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter returns a Writer on w, the child's stdout.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Printf writes one line, formatted as fmt.Sprintf does; a newline is added.
func (w *Writer) Printf(format string, args ...any) {
	line := fmt.Sprintf(format, args...) + "\n"
	w.mu.Lock()
	defer w.mu.Unlock()
	io.WriteString(w.w, line)
}

// Error writes the line that tells the parent the child failed: ErrorPrefix and
// err, its newlines turned into spaces.
func (w *Writer) Error(err error) {
	w.Printf("%s %s", ErrorPrefix, strings.ReplaceAll(err.Error(), "\n", " "))
}
