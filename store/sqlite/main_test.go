package sqlite_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every store a test opens, and every goroutine the conformance suite starts, must be gone once the tests end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
