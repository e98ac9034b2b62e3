package console_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/axsched/ax/internal/browsertest"
	"go.uber.org/goleak"
)

// browser is the one Chromium of the package's browser tests.
var chromium browsertest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	chromium.Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}
