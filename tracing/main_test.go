package tracing_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The tests start schedulers: each must leave no goroutine behind once stopped.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
