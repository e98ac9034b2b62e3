package admin

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store"
)

// This file makes what a request said safe to keep and to show: in an audit record,
// and quoted in a message.

// sanitizedNote ends the result of a record whose target, reason or result was made
// safe, with the names of those fields: " [sanitized: target, reason]".
const sanitizedNote = " [sanitized: "

// safeRecord is rec as every store keeps it: its target, reason and result valid
// UTF-8 without NUL (each invalid sequence and each NUL replaced by U+FFFD) and
// within the store's bounds (cut at a rune boundary). A target or reason so changed
// is named in a note at the end of the result; a result too, when it held what had
// to be replaced (an echo of the request).
func safeRecord(rec ax.AuditRecord) ax.AuditRecord {
	var changed []string
	var replaced, cut bool
	if rec.Target, replaced, cut = safeText(rec.Target, store.MaxAuditText); replaced || cut {
		changed = append(changed, "target")
	}
	if rec.Reason, replaced, cut = safeText(rec.Reason, store.MaxAuditReason); replaced || cut {
		changed = append(changed, "reason")
	}
	if rec.Result, replaced, _ = safeText(rec.Result, maxResult); replaced {
		changed = append(changed, "result")
	}
	if len(changed) > 0 {
		note := sanitizedNote + strings.Join(changed, ", ") + "]"
		rec.Result = truncate(rec.Result, maxResult-len(note)) + note
	}
	return rec
}

// safeText is s with each invalid UTF-8 sequence and each NUL replaced by U+FFFD,
// then cut to max bytes at a rune boundary; it reports whether it replaced, and
// whether it cut.
func safeText(s string, max int) (safe string, replaced, cut bool) {
	if !store.CleanText(s) {
		s, replaced = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD"), true
	}
	safe = truncate(s, max)
	return safe, replaced, len(safe) < len(s)
}

// maxReason bounds an action's reason, and maxResult an audit record's result, as
// the audit log does.
const (
	maxReason = store.MaxAuditReason
	maxResult = store.MaxAuditText
)

// truncate is s cut to at most n bytes, at a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// maxQuoted bounds what a message quotes of a request, in bytes.
const maxQuoted = 100

// quoteShort quotes s for a message, cut to maxQuoted bytes (at a rune boundary)
// with "…" after.
func quoteShort(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	return strconv.Quote(truncate(s, maxQuoted)) + "…"
}
