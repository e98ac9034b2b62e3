package demo

import (
	"testing"

	"go.uber.org/goleak"
)

// Every demo run, its scheduler and its metrics server, must leave no goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
