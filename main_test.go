package ax_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every scheduler a test starts must leave no goroutine behind once stopped.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
