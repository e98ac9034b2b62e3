package memory_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The conformance suite's concurrent cases must leave no goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
