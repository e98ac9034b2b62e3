package browsertest

import "github.com/chromedp/chromedp"

// PID returns the process id of b's Chromium.
func PID(b *Browser) int { return chromedp.FromContext(b.ctx).Browser.Process().Pid }
