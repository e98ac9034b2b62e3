// Package browsertest drives Debian's headless Chromium from tests, the way a person
// uses a page: navigate, click, type, submit, read the text, look at the cookies. It
// also checks a page with axe-core, collects the page's console errors and
// Content-Security-Policy violations, and saves screenshots.
//
// A package starts one browser for all its tests and gives each test its own [Tab].
// Every tab has its own browser context, so its cookies and storage are its own: two
// tabs are two users.
//
//	var browser browsertest.Shared
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		browser.Close()
//		if code == 0 {
//			if err := goleak.Find(); err != nil {
//				fmt.Fprintln(os.Stderr, err)
//				code = 1
//			}
//		}
//		os.Exit(code)
//	}
//
//	func TestSignIn(t *testing.T) {
//		tab := browser.Get(t).Tab(t, browsertest.WithoutJavaScript())
//		tab.Navigate(srv.URL + "/signin")
//		tab.SendKeys("#user", "ops")
//		tab.Click("button[type=submit]")
//		browsertest.AssertNoSeriousAxe(t, tab)
//	}
//
// The browser is /usr/bin/chromium, or chromium on PATH. Without it a test is
// skipped, unless AX_REQUIRE_SERVICES=1: then it fails.
//
// Screenshots go to the directory named by AX_SCREENSHOTS, made if missing; when it is
// unset, to a temporary directory of the test, removed after it.
//
// Every action waits at most the tab's timeout ([DefaultTimeout] unless [WithTimeout]
// says otherwise) and fails the test with the action, the selector and the page's URL.
// A Tab belongs to the test that made it: call its methods from that test's goroutine.
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Defaults of the options.
const (
	// DefaultTimeout bounds each action of a tab.
	DefaultTimeout = 10 * time.Second

	// DesktopWidth and DesktopHeight are the default viewport, in CSS pixels.
	DesktopWidth  = 1920
	DesktopHeight = 1080

	// MobileWidth and MobileHeight are the viewport of [WithMobile], in CSS pixels.
	MobileWidth  = 390
	MobileHeight = 844
)

// ErrNoChromium is returned by [Start] when no Chromium is installed.
var ErrNoChromium = errors.New("browsertest: chromium not found (apt-get install chromium)")

// An Option sets how a tab behaves. Given to [New], [Start] or [Shared], it sets the
// default of every tab of that browser; given to [Browser.Tab], it sets that tab only.
type Option func(*settings)

type settings struct {
	noJS          bool
	width, height int
	mobile        bool
	dark          bool
	timeout       time.Duration
}

func defaults() settings {
	return settings{width: DesktopWidth, height: DesktopHeight, timeout: DefaultTimeout}
}

func (s settings) with(opts []Option) settings {
	for _, o := range opts {
		o(&s)
	}
	return s
}

// WithoutJavaScript turns script execution off in the page, as a person who disabled
// JavaScript sees it. The tab's own helpers (Eval, Text, Axe…) still work: they run
// through the DevTools protocol, not as page scripts.
func WithoutJavaScript() Option { return func(s *settings) { s.noJS = true } }

// WithJavaScript turns script execution on; it undoes a browser-wide
// [WithoutJavaScript] for one tab.
func WithJavaScript() Option { return func(s *settings) { s.noJS = false } }

// WithViewport sets the viewport to width × height CSS pixels, as a desktop browser.
func WithViewport(width, height int) Option {
	return func(s *settings) { s.width, s.height, s.mobile = width, height, false }
}

// WithMobile sets the viewport to MobileWidth × MobileHeight and emulates a mobile
// device: the page's meta viewport applies and touch events are on.
func WithMobile() Option {
	return func(s *settings) { s.width, s.height, s.mobile = MobileWidth, MobileHeight, true }
}

// WithDarkMode makes the tab's pages see a system in dark mode (the media feature
// prefers-color-scheme: dark).
func WithDarkMode() Option { return func(s *settings) { s.dark = true } }

// WithTimeout bounds each action of a tab by d instead of DefaultTimeout.
func WithTimeout(d time.Duration) Option { return func(s *settings) { s.timeout = d } }

// Browser is one running headless Chromium. Its methods are safe for concurrent use.
type Browser struct {
	settings settings
	ctx      context.Context // the browser's chromedp context; tabs derive from it
	cancel   context.CancelFunc
	stopOnce sync.Once
	stopErr  error
}

// New starts a browser for the test t and stops it when t ends. It skips t when no
// Chromium is installed, or fails it when AX_REQUIRE_SERVICES=1. A package whose
// tests share one browser uses [Shared] instead.
func New(t testing.TB, opts ...Option) *Browser {
	t.Helper()
	b, err := start(t.TempDir(), opts)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("browsertest: stop chromium: %v", err)
		}
	})
	return b
}

// Start starts a browser that lives until Close. It returns an error wrapping
// ErrNoChromium when no Chromium is installed.
func Start(opts ...Option) (*Browser, error) { return start("", opts) }

// chromiums are the Chromiums to try, in order: a path, or a name looked up on PATH.
var chromiums = []string{"/usr/bin/chromium", "chromium"}

// chromiumPath returns the Chromium to run.
func chromiumPath() (string, error) {
	for _, c := range chromiums {
		if p, err := exec.LookPath(c); err == nil {
			return p, nil
		}
	}
	return "", ErrNoChromium
}

// start runs Chromium with its profile in dataDir; "" lets chromedp make and remove one.
func start(dataDir string, opts []Option) (*Browser, error) {
	path, err := chromiumPath()
	if err != nil {
		return nil, err
	}
	s := defaults().with(opts)
	flags := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.WindowSize(s.width, s.height),
		// This machine's network is closed: without these, Chromium's own
		// background connections are refused and fill the log.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("disable-features", "Translate,MediaRouter,OptimizationHints"),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("use-mock-keychain", true),
		chromedp.Flag("force-color-profile", "srgb"),
	}
	if dataDir != "" {
		flags = append(flags, chromedp.UserDataDir(dataDir))
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), flags...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx, chromedp.WithErrorf(func(string, ...any) {}))
	b := &Browser{settings: s, ctx: ctx, cancel: func() { cancelCtx(); cancelAlloc() }}

	// The first Run starts the process; its context must not carry the timeout,
	// which would stop the browser when it expires, so a timer bounds it instead.
	timer := time.AfterFunc(30*time.Second, cancelCtx)
	err = chromedp.Do(ctx)
	if !timer.Stop() { // the timer stopped the browser, whatever Do returned
		err = fmt.Errorf("no answer within 30s (%v)", err)
	}
	if err != nil {
		b.cancel()
		return nil, fmt.Errorf("browsertest: start %s: %w", path, err)
	}
	return b, nil
}

// Close stops the browser and waits until its process has exited. Tabs still open
// are closed with it. Close is idempotent.
func (b *Browser) Close() error {
	b.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		err := chromedp.Cancel(ctx)
		cancel()
		b.cancel() // kills the process if the graceful close did not end it
		if err != nil && !errors.Is(err, context.Canceled) {
			b.stopErr = err
		}
	})
	return b.stopErr
}

// Shared is one browser for all the tests of a package, started by the first Get.
// The zero value is ready to use; Options, if set, must be set before the first Get.
// Call Close from TestMain after m.Run, before checking for leaked goroutines.
type Shared struct {
	Options []Option

	mu      sync.Mutex
	browser *Browser
	err     error
	closed  bool
}

// Get returns the shared browser, starting it on the first call. It skips t when no
// Chromium is installed, or fails it when AX_REQUIRE_SERVICES=1.
func (s *Shared) Get(t testing.TB) *Browser {
	t.Helper()
	s.mu.Lock()
	if s.browser == nil && s.err == nil {
		if s.closed {
			s.err = errors.New("browsertest: Shared.Get after Close")
		} else {
			s.browser, s.err = Start(s.Options...)
		}
	}
	b, err := s.browser, s.err
	s.mu.Unlock()
	if err != nil {
		unavailable(t, err)
	}
	return b
}

// Close stops the shared browser, if Get started it.
func (s *Shared) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.browser == nil {
		return nil
	}
	return s.browser.Close()
}

// unavailable skips t when Chromium is missing (fails it under AX_REQUIRE_SERVICES=1),
// and fails it on any other error.
func unavailable(t testing.TB, err error) {
	t.Helper()
	if !errors.Is(err, ErrNoChromium) {
		t.Fatal(err)
	}
	if os.Getenv("AX_REQUIRE_SERVICES") == "1" {
		t.Fatalf("%v; it is required (AX_REQUIRE_SERVICES=1)", err)
	}
	t.Skipf("%v; skipping (set AX_REQUIRE_SERVICES=1 to fail instead)", err)
}
