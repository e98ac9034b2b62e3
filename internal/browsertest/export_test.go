package browsertest

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// PID returns the process id of b's Chromium.
func PID(b *Browser) int { return chromedp.FromContext(b.ctx).Browser.Process().Pid }

// SetChromiums replaces the Chromiums to try until the test ends.
func SetChromiums(t testing.TB, paths ...string) {
	old := chromiums
	chromiums = paths
	t.Cleanup(func() { chromiums = old })
}
