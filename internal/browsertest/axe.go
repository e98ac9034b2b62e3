package browsertest

import (
	_ "embed"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// axeSource is axe-core, vendored with its license; see testdata/axe-core/README.md.
//
//go:embed testdata/axe-core/axe.min.js
var axeSource string

// Violation is one axe-core rule that the page fails.
type Violation struct {
	ID      string // the rule, e.g. "image-alt"
	Impact  string // "minor", "moderate", "serious" or "critical"
	Help    string // what the rule asks for, in one line
	HelpURL string
	Nodes   []ViolationNode
}

// ViolationNode is one element that fails a rule.
type ViolationNode struct {
	Target string // a CSS selector of the element; frames and shadow roots joined by " >>> "
	HTML   string // the element's opening tag, as axe-core shows it
}

// Serious reports whether the violation's impact is serious or critical.
func (v Violation) Serious() bool { return v.Impact == "serious" || v.Impact == "critical" }

// String gives the rule, its impact, its help and the failing elements, on one line.
func (v Violation) String() string {
	targets := make([]string, len(v.Nodes))
	for i, n := range v.Nodes {
		targets[i] = n.Target
	}
	return fmt.Sprintf("%s (%s): %s — %s", v.ID, v.Impact, v.Help, strings.Join(targets, ", "))
}

// axeRun runs axe-core on the document and returns its violations in the shape of
// Violation. It injects axe-core first when the page does not have it yet.
const axeRun = `(async () => {
	const r = await axe.run(document, {resultTypes: ["violations"]});
	const target = (t) => Array.isArray(t) ? t.map(target).join(" >>> ") : String(t);
	return r.violations.map((v) => ({
		ID: v.id, Impact: v.impact || "", Help: v.help, HelpURL: v.helpUrl,
		Nodes: v.nodes.map((n) => ({Target: target(n.target), HTML: n.html})),
	}));
})()`

// Axe checks the page in the tab with axe-core's default rules and returns the
// violations. axe-core is injected through the DevTools protocol, so the page's
// Content-Security-Policy need not allow it. With JavaScript off, scripts are turned
// on while axe-core runs (the page's own scripts, skipped at load, stay unrun) and
// off again after.
func (tab *Tab) Axe(t testing.TB) []Violation {
	t.Helper()
	var vs []Violation
	tab.withScripts(func() {
		var has bool
		tab.eval(`typeof window.axe === "object"`, &has)
		if !has {
			run(tab, "inject axe-core", chromedp.Evaluate[chromedp.Void](axeSource))
		}
		tab.eval(axeRun, &vs)
	})
	return vs
}

// AssertNoSeriousAxe runs axe-core on the page in tab and fails t for each violation
// of serious or critical impact; lesser ones are logged.
func AssertNoSeriousAxe(t testing.TB, tab *Tab) {
	t.Helper()
	for _, v := range tab.Axe(t) {
		if v.Serious() {
			t.Errorf("axe on %s: %v", tab.currentURL(), v)
		} else {
			t.Logf("axe on %s: %v", tab.currentURL(), v)
		}
	}
}
