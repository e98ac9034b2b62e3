package pgcluster

import (
	"testing"

	"go.uber.org/goleak"
)

// The harness's HTTP requests and connections must leave no goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
