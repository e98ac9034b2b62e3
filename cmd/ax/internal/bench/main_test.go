package bench

import (
	"testing"

	"go.uber.org/goleak"
)

// Every workload's scheduler must leave no goroutine behind once it returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
