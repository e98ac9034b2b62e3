package servicetest

import (
	"testing"

	"go.uber.org/goleak"
)

// Every proxy a test starts must leave no goroutine behind once closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
