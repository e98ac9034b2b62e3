package childproc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// childEnv names the part the test binary plays when a test starts it as a child.
const childEnv = "AX_CHILDPROC_CHILD"

// Every child must be reaped and every reader done when a test ends.
func TestMain(m *testing.M) {
	if part := os.Getenv(childEnv); part != "" {
		runChild(part)
		return
	}
	goleak.VerifyTestMain(m)
}

// runChild plays part: "echo" prints READY, then ECHO and each line of its stdin
// until it closes; "fail" prints ERROR; "silent" exits at once with status 3;
// "tick" prints READY, then every millisecond until killed TICK and the wall-clock
// time, in Unix nanoseconds, at which it writes it.
func runChild(part string) {
	out := NewWriter(os.Stdout)
	switch part {
	case "echo":
		fmt.Fprintln(os.Stderr, "echo: on stderr")
		out.Printf("READY")
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			out.Printf("ECHO %s", sc.Text())
		}
		out.Printf("BYE")
	case "fail":
		out.Error(errors.New("boom\nat line two"))
		os.Exit(1)
	case "silent":
		os.Exit(3)
	case "tick":
		out.Printf("READY")
		for {
			out.Printf("TICK %d", time.Now().UnixNano())
			time.Sleep(time.Millisecond)
		}
	}
	os.Exit(0)
}
