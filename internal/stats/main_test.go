package stats_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every aggregator a test starts must have stopped once the tests end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
