package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/storage"
	"github.com/chromedp/chromedp"
)

// Tab is one page in a browser context of its own: its cookies, storage and cache are
// shared with no other tab. It is closed when the test that made it ends. Its methods
// fail that test when an action fails or takes longer than the tab's timeout; call
// them from the test's goroutine.
type Tab struct {
	t        testing.TB
	ctx      context.Context
	settings settings

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every recorded event
	url       string        // of the main frame, as last navigated
	mainFrame cdp.FrameID
	navs      int // navigations of the main frame requested by the page
	stops     int // times the main frame stopped loading
	errors    []string
}

// Tab opens a new tab, in a new browser context, and closes it when t ends. The
// options override the browser's for this tab.
func (b *Browser) Tab(t testing.TB, opts ...Option) *Tab {
	t.Helper()
	tab := &Tab{t: t, settings: b.settings.with(opts), changed: make(chan struct{})}
	ctx, cancel := chromedp.NewContext(b.ctx,
		chromedp.WithNewBrowserContext(),
		chromedp.WithListener(tab.record))
	tab.ctx = ctx
	t.Cleanup(cancel)

	// The first Run opens the target and binds it to the context it is given, so
	// that context carries no deadline; a timer bounds the wait instead. Opening
	// takes longer than an action: it gets at least DefaultTimeout.
	wait := max(tab.settings.timeout, DefaultTimeout)
	timer := time.AfterFunc(wait, cancel)
	err := chromedp.Do(ctx, chromedp.Func(tab.emulate))
	if !timer.Stop() { // the timer canceled the tab, whatever Do returned
		err = fmt.Errorf("no answer within %v (%v)", wait, err)
	}
	if err != nil {
		t.Fatalf("browsertest: open tab: %v", err)
	}
	return tab
}

// emulate applies the tab's viewport and script settings; they last across navigations.
func (tab *Tab) emulate(ctx context.Context, target *chromedp.Target) error {
	s := tab.settings
	if _, err := cdp.Call(ctx, target, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
		Width: int64(s.width), Height: int64(s.height), DeviceScaleFactor: 1, Mobile: s.mobile,
	}); err != nil {
		return fmt.Errorf("set viewport: %w", err)
	}
	if s.mobile {
		if _, err := cdp.Call(ctx, target, emulation.SetTouchEmulationEnabled, emulation.SetTouchEmulationEnabledParams{Enabled: true}); err != nil {
			return fmt.Errorf("enable touch: %w", err)
		}
	}
	if s.dark {
		if _, err := cdp.Call(ctx, target, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
		}); err != nil {
			return fmt.Errorf("emulate dark mode: %w", err)
		}
	}
	if s.noJS {
		if _, err := cdp.Call(ctx, target, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
			return fmt.Errorf("disable scripts: %w", err)
		}
	}
	return nil
}

// record runs on the tab's event loop for every event: it must be quick and must not
// call the browser.
func (tab *Tab) record(ev any) {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError && ev.Type != runtime.ConsoleAPICalledTypeAssert {
			return
		}
		var args []string
		for _, a := range ev.Args {
			switch {
			case len(a.Value) > 0:
				var s string
				if json.Unmarshal(a.Value, &s) == nil {
					args = append(args, s)
				} else {
					args = append(args, string(a.Value))
				}
			case a.Description != "":
				args = append(args, a.Description)
			default:
				args = append(args, string(a.Type))
			}
		}
		tab.errors = append(tab.errors, "console."+string(ev.Type)+": "+strings.Join(args, " "))
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			msg += " " + d.Exception.Description
		}
		tab.errors = append(tab.errors, fmt.Sprintf("exception: %s (%s:%d)", msg, d.URL, d.LineNumber+1))
	case *log.EventEntryAdded:
		e := ev.Entry
		if e.Level != log.EntryLevelError {
			return
		}
		msg := fmt.Sprintf("%s: %s", e.Source, e.Text)
		if e.URL != "" {
			msg += " (" + e.URL + ")"
		}
		tab.errors = append(tab.errors, msg)
	case *page.EventFrameNavigated:
		if ev.Frame.ParentID != "" {
			return
		}
		tab.mainFrame, tab.url = ev.Frame.ID, ev.Frame.URL
	case *page.EventFrameRequestedNavigation:
		if ev.FrameID != tab.mainFrame || ev.Disposition != page.ClientNavigationDispositionCurrentTab {
			return
		}
		tab.navs++
	case *page.EventFrameStoppedLoading:
		if ev.FrameID != tab.mainFrame {
			return
		}
		tab.stops++
	default:
		return
	}
	close(tab.changed)
	tab.changed = make(chan struct{})
}

// waitFor returns once cond, called under tab.mu, holds, or when ctx ends.
func (tab *Tab) waitFor(ctx context.Context, cond func() bool) error {
	for {
		tab.mu.Lock()
		ok, ch := cond(), tab.changed
		tab.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Errors returns what the page reported as an error since the tab opened: calls of
// console.error and console.assert, uncaught exceptions, and the browser's own error
// entries, among them Content-Security-Policy violations and failed loads.
func (tab *Tab) Errors() []string {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	return append([]string(nil), tab.errors...)
}

// run runs a on the tab within the tab's timeout; on failure it fails the test with
// what was being done and the page's URL.
func run[T any](tab *Tab, what string, a chromedp.Action[T]) T {
	tab.t.Helper()
	ctx, cancel := context.WithTimeout(tab.ctx, tab.settings.timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("timed out after %v: %w", tab.settings.timeout, err)
		}
		tab.t.Fatalf("browsertest: %s on %s: %v", what, tab.currentURL(), err)
	}
	return v
}

func (tab *Tab) currentURL() string {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	if tab.url == "" {
		return "a blank page"
	}
	return tab.url
}

// Navigate loads url in the tab and waits until the page has loaded.
func (tab *Tab) Navigate(url string) {
	tab.t.Helper()
	run(tab, fmt.Sprintf("navigate to %s", url), chromedp.Navigate(url))
}

// Location returns the URL of the page in the tab.
func (tab *Tab) Location() string {
	tab.t.Helper()
	return run(tab, "read location", chromedp.Location())
}

// Click waits until the element matching the CSS selector is visible and clicks it
// with the mouse. When the click makes the page navigate (a link, a submit button),
// Click waits until the new page has loaded.
func (tab *Tab) Click(selector string) {
	tab.t.Helper()
	tab.navigating(fmt.Sprintf("click %q", selector), chromedp.Click(chromedp.CSS(selector), chromedp.NodeVisible))
}

// Submit submits the form matched by the CSS selector, or the form of the element
// it matches, as pressing its submit button does: validation and submit handlers
// run. It waits for the resulting page to load, if the page navigates.
func (tab *Tab) Submit(selector string) {
	tab.t.Helper()
	const js = `function() {
		const form = this instanceof HTMLFormElement ? this : (this.form || this.closest('form'));
		if (!form) { return false; }
		form.requestSubmit();
		return true;
	}`
	tab.navigating(fmt.Sprintf("submit %q", selector), chromedp.QueryAfter(chromedp.CSS(selector),
		func(ctx context.Context, target *chromedp.Target, nodes []*chromedp.Node) (chromedp.Void, error) {
			ok, err := callOn[bool](ctx, target, nodes[0], js)
			if err == nil && !ok {
				err = fmt.Errorf("no form there")
			}
			return chromedp.Void{}, err
		}))
}

// navigating runs a, and then, if a made the page ask for a navigation of its main
// frame, waits until that frame stops loading.
func (tab *Tab) navigating(what string, a chromedp.Action[chromedp.Void]) {
	tab.t.Helper()
	tab.mu.Lock()
	navs, stops := tab.navs, tab.stops
	tab.mu.Unlock()
	run(tab, what, a)
	// A click or a submit asks for the navigation from a task of the page that
	// may run after the action returns; an evaluation is queued behind it, so
	// once it answers, the request has been reported.
	run(tab, what, chromedp.Evaluate[chromedp.Void]("0"))
	tab.mu.Lock()
	asked := tab.navs > navs
	tab.mu.Unlock()
	if !asked {
		return
	}
	ctx, cancel := context.WithTimeout(tab.ctx, tab.settings.timeout)
	defer cancel()
	if err := tab.waitFor(ctx, func() bool { return tab.stops > stops }); err != nil {
		tab.t.Fatalf("browsertest: %s: the page did not finish loading within %v (at %s)", what, tab.settings.timeout, tab.currentURL())
	}
}

// SetValue waits for the element matching the CSS selector and sets its value, as
// pasting does: no key events.
func (tab *Tab) SetValue(selector, value string) {
	tab.t.Helper()
	run(tab, fmt.Sprintf("set the value of %q", selector), chromedp.SetValue(chromedp.CSS(selector), value))
}

// SendKeys waits until the element matching the CSS selector is visible, focuses it
// and types text, one key event per character.
func (tab *Tab) SendKeys(selector, text string) {
	tab.t.Helper()
	run(tab, fmt.Sprintf("type into %q", selector), chromedp.SendKeys(chromedp.CSS(selector), text, chromedp.NodeVisible))
}

// Text waits for the element matching the CSS selector and returns its visible text
// (innerText).
func (tab *Tab) Text(selector string) string {
	tab.t.Helper()
	return run(tab, fmt.Sprintf("read the text of %q", selector), chromedp.Text(chromedp.CSS(selector)))
}

// Exists reports whether an element matches the CSS selector now; it does not wait.
func (tab *Tab) Exists(selector string) bool {
	tab.t.Helper()
	q, _ := json.Marshal(selector)
	return run(tab, fmt.Sprintf("look for %q", selector),
		chromedp.Evaluate[bool]("document.querySelector("+string(q)+") !== null"))
}

// Eval evaluates the JavaScript expression in the page and decodes its JSON value
// into out, unless out is nil. A promise is awaited. It runs through the DevTools
// protocol, so it is not bound by the page's Content-Security-Policy; it is for test
// assertions, not for acting as the user. In a tab without JavaScript, scripts are
// turned on while it runs, so that promises and timers work; the page's own scripts,
// skipped when it loaded, stay unrun.
func (tab *Tab) Eval(js string, out any) {
	tab.t.Helper()
	tab.withScripts(func() { tab.eval(js, out) })
}

func (tab *Tab) eval(js string, out any) {
	tab.t.Helper()
	raw := run(tab, fmt.Sprintf("evaluate %.80q", js), chromedp.Evaluate[[]byte](js, chromedp.EvalAwaitPromise))
	if out == nil {
		return
	}
	if err := json.Unmarshal(raw, out); err != nil {
		tab.t.Fatalf("browsertest: evaluate %.80q on %s: decode %s: %v", js, tab.currentURL(), raw, err)
	}
}

// withScripts runs f with the page's script execution on, turning it off again after
// when the tab is without JavaScript.
func (tab *Tab) withScripts(f func()) {
	tab.t.Helper()
	if !tab.settings.noJS {
		f()
		return
	}
	tab.scripts(true)
	defer tab.scripts(false)
	f()
}

// scripts turns the page's script execution on or off.
func (tab *Tab) scripts(on bool) {
	tab.t.Helper()
	run(tab, fmt.Sprintf("turn scripts on=%v", on), chromedp.Func(func(ctx context.Context, target *chromedp.Target) error {
		_, err := cdp.Call(ctx, target, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: !on})
		return err
	}))
}

// Cookie is a cookie of the tab's browser context.
type Cookie struct {
	Name, Value, Domain, Path string
	HTTPOnly, Secure          bool
	SameSite                  string // "Strict", "Lax", "None", or "" when the cookie set none
}

// Cookies returns every cookie of the tab's browser context, for any site.
func (tab *Tab) Cookies() []Cookie {
	tab.t.Helper()
	res := run(tab, "read cookies", func(ctx context.Context, _ *chromedp.Target) (storage.GetCookiesResult, error) {
		c := chromedp.FromContext(ctx)
		return cdp.Call(ctx, c.Browser, storage.GetCookies, storage.GetCookiesParams{BrowserContextID: c.BrowserContextID})
	})
	out := make([]Cookie, 0, len(res.Cookies))
	for _, c := range res.Cookies {
		out = append(out, Cookie{
			Name: c.Name, Value: c.Value, Domain: c.Domain, Path: c.Path,
			HTTPOnly: c.HTTPOnly, Secure: c.Secure, SameSite: string(c.SameSite),
		})
	}
	return out
}

// Screenshot saves a PNG of the whole page, beyond the viewport, and returns its
// path: <dir>/<test name>-<name>.png, where dir is $AX_SCREENSHOTS (made if missing)
// or, when that is unset, a temporary directory of the test.
func (tab *Tab) Screenshot(name string) string {
	tab.t.Helper()
	png := run(tab, fmt.Sprintf("take screenshot %q", name), chromedp.FullScreenshot(100))
	dir := os.Getenv("AX_SCREENSHOTS")
	if dir == "" {
		dir = tab.t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		tab.t.Fatalf("browsertest: screenshot %q: %v", name, err)
	}
	path := filepath.Join(dir, fileName(tab.t.Name()+"-"+name)+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tab.t.Fatalf("browsertest: screenshot %q: %v", name, err)
	}
	return path
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func fileName(s string) string { return unsafeChars.ReplaceAllString(s, "_") }

// Fetch sends a request with fetch() from the page in the tab, with the page's origin
// and cookies (credentials "include"), and returns the response's status. Status 0
// means the page could not read a response: the browser blocked the request (CORS,
// the page's Content-Security-Policy, mixed content) or it failed; the reason is
// logged. Use it from a page of another origin to forge a cross-site request.
func (tab *Tab) Fetch(method, url, body string, headers map[string]string) int {
	tab.t.Helper()
	if headers == nil {
		headers = map[string]string{}
	}
	init := map[string]any{"method": method, "credentials": "include", "headers": headers}
	if body != "" {
		init["body"] = body
	}
	args, err := json.Marshal([]any{url, init})
	if err != nil {
		tab.t.Fatalf("browsertest: fetch %s %s: %v", method, url, err)
	}
	js := `(async ([url, init]) => {
		try {
			const r = await fetch(url, init);
			return {status: r.status, error: ""};
		} catch (e) {
			return {status: 0, error: String(e)};
		}
	})(` + string(args) + `)`
	var res struct {
		Status int
		Error  string
	}
	tab.Eval(js, &res)
	if res.Error != "" {
		tab.t.Logf("browsertest: fetch %s %s from %s: %s", method, url, tab.currentURL(), res.Error)
	}
	return res.Status
}

// callOn calls the JavaScript function on the node, as this, and decodes its value.
func callOn[T any](ctx context.Context, target *chromedp.Target, n *chromedp.Node, fn string) (T, error) {
	var zero T
	obj, err := cdp.Call(ctx, target, dom.ResolveNode, dom.ResolveNodeParams{NodeID: n.NodeID})
	if err != nil {
		return zero, err
	}
	defer cdp.Call(ctx, target, runtime.ReleaseObject, runtime.ReleaseObjectParams{ObjectID: obj.Object.ObjectID})
	res, err := cdp.Call(ctx, target, runtime.CallFunctionOn, runtime.CallFunctionOnParams{
		FunctionDeclaration: fn,
		ObjectID:            obj.Object.ObjectID,
		ReturnByValue:       ptr(true),
	})
	if err != nil {
		return zero, err
	}
	if res.ExceptionDetails != nil {
		return zero, &chromedp.ExceptionError{ExceptionDetails: res.ExceptionDetails}
	}
	var v T
	if err := json.Unmarshal(res.Result.Value, &v); err != nil {
		return zero, fmt.Errorf("decode %s: %w", res.Result.Value, err)
	}
	return v, nil
}

func ptr[T any](v T) *T { return &v }
