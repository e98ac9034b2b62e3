package cluster

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// nodeEnv, set to 1, makes the test binary one replica of the cluster scenario
// (RunNode on its stdin and stdout) instead of running the tests: the tests'
// Config.NodeCommand re-executes the test binary with it.
const nodeEnv = "AX_DEMO_NODE"

// Every run must leave no goroutine behind: replicas reaped, their readers done.
func TestMain(m *testing.M) {
	if os.Getenv(nodeEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := RunNode(ctx, os.Stdin, os.Stdout, os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintf(os.Stderr, "ax: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
