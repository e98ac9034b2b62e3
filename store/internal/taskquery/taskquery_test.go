package taskquery

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/store"
)

func TestSuccessor(t *testing.T) {
	for _, c := range []struct {
		prefix, want string
		ok           bool
	}{
		{"a", "b", true},
		{"order-4", "order-5", true},
		{"k/", "k0", true},
		{"\x00", "\x01", true},       // Successor's arithmetic only: CheckTaskQuery refuses a NUL in a prefix
		{"a\u007f", "a\u0080", true}, // one byte to two
		{"a\u00bf", "a\u00c0", true}, // "a¿" to "aÀ": a carry into the lead byte
		{"a\u00ff", "a\u0100", true}, // "aÿ" to "aĀ"
		{"é", "ê", true},
		{"a\u07ff", "a\u0800", true},         // two bytes to three
		{"a\ud7ff", "a\ue000", true},         // over the surrogates
		{"a\ufffd", "a\ufffe", true},         // the replacement character is a rune like another
		{"a\uffff", "a\U00010000", true},     // three bytes to four
		{"a\U0001f600", "a\U0001f601", true}, // 😀
		{"a\U0010ffff", "b", true},           // the last code point: increment the rune before
		{"a\U0010ffff\U0010ffff", "b", true},
		{"\u00ff\U0010ffff", "\u0100", true},
		{"\U0010ffff", "", false},
		{"\U0010ffff\U0010ffff", "", false},
		{"", "", false},
	} {
		got, ok := Successor(c.prefix)
		if got != c.want || ok != c.ok {
			t.Errorf("Successor(%+q) = %+q, %v; want %+q, %v", c.prefix, got, ok, c.want, c.ok)
		}
		if !utf8.ValidString(got) {
			t.Errorf("Successor(%+q) = %+q: not valid UTF-8", c.prefix, got)
		}
	}
}

// inRange reports whether s lies in the range Successor gives for p.
func inRange(p, s string) bool {
	next, ok := Successor(p)
	return p <= s && (!ok || s < next)
}

// For valid strings s and p, s has the prefix p if and only if it lies in
// [p, Successor(p)) in byte order; and no valid string lies between the strings with
// the prefix and the successor: the successor itself is the least above them.
func TestSuccessorRange(t *testing.T) {
	// Runes at every boundary of UTF-8's encodings and of Successor's cases, and some
	// chosen at random.
	edges := []rune{0, 1, 'a', 'b', 0x7e, 0x7f, 0x80, 0x81, 0xbf, 0xc0, 0xff, 0x100, 0x7ff, 0x800, 0xd7ff, 0xe000,
		0xfffd, 0xfffe, 0xffff, 0x10000, 0x1f600, 0x10fffe, utf8.MaxRune}
	rng := rand.New(rand.NewPCG(1, 2))
	runeOf := func() rune {
		if rng.IntN(4) > 0 {
			return edges[rng.IntN(len(edges))]
		}
		for {
			if r := rune(rng.IntN(utf8.MaxRune + 1)); utf8.ValidRune(r) {
				return r
			}
		}
	}
	str := func(max int) string {
		var b strings.Builder
		for range rng.IntN(max + 1) {
			b.WriteRune(runeOf())
		}
		return b.String()
	}
	for range 200_000 {
		p := str(3)
		if p == "" {
			continue
		}
		var s string
		switch rng.IntN(4) {
		case 0:
			s = p + str(3) // has the prefix
		case 1:
			s = str(4) // most likely not
		case 2: // shares all but the last rune of p
			_, size := utf8.DecodeLastRuneInString(p)
			s = p[:len(p)-size] + str(3)
		case 3:
			if next, ok := Successor(p); ok {
				s = next + str(2) // at or above the bound
			} else {
				s = p
			}
		}
		if has, in := strings.HasPrefix(s, p), inRange(p, s); has != in {
			next, ok := Successor(p)
			t.Fatalf("prefix %+q, string %+q: HasPrefix = %v, but in [prefix, %+q (%v)) = %v", p, s, has, next, ok, in)
		}
		if next, ok := Successor(p); ok {
			if !utf8.ValidString(next) || next <= p || strings.HasPrefix(next, p) {
				t.Fatalf("Successor(%+q) = %+q: want valid UTF-8, above the prefix and without it", p, next)
			}
		}
	}
}

var numbered = Dialect{
	Placeholder: func(n int) string { return "$" + strconv.Itoa(n) },
	Time:        func(t time.Time) any { return t },
	Prefix:      func(ph func(any) string, p string) string { return "starts_with(key, " + ph(p) + ")" },
}

// Select writes each filter once, binds each value once, in order, and writes the
// statuses as literals; a cursor follows the order.
func TestSelect(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	sql, args := Select(numbered, "id", "ax_tasks", "ns", store.TaskQuery{
		Statuses: []store.Status{store.Failed, store.Cancelled}, Name: "n", KeyPrefix: "k", OwnerService: "o", TaskKey: "tk",
		DueFrom: at, FinishedBefore: at, Soonest: true, After: &store.TaskCursor{ID: 7, DueAt: at}, Limit: 11,
	})
	want := "SELECT id FROM ax_tasks WHERE namespace = $1 AND status IN ('FAILED', 'CANCELLED') AND name = $2 AND starts_with(key, $3)" +
		" AND owner_service = $4 AND task_key = $5 AND due_at >= $6 AND finished_at < $7 AND (due_at > $8 OR (due_at = $9 AND id > $10))" +
		" ORDER BY due_at, id LIMIT $11"
	if sql != want {
		t.Errorf("Select =\n%s\nwant\n%s", sql, want)
	}
	if len(args) != 11 || args[0] != "ns" || args[1] != "n" || args[9] != int64(7) || args[10] != 11 {
		t.Errorf("Select args = %v", args)
	}
	sql, _ = Select(numbered, "id", "ax_tasks", "ns", store.TaskQuery{Statuses: []store.Status{store.Scheduled}, After: &store.TaskCursor{ID: 7}, Limit: 1})
	if !strings.Contains(sql, "status = 'SCHEDULED'") || !strings.Contains(sql, "id < $2") || !strings.HasSuffix(sql, "ORDER BY id DESC LIMIT $3") {
		t.Errorf("Select (one status, newest first, a cursor) = %s", sql)
	}
}

// AuditSelect reads by id without a time bound, by (at, id) with one, its bounds
// truncated to microseconds, and binds one argument per placeholder.
func TestAuditSelect(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 1999, time.FixedZone("X", 3600))
	sql, args := AuditSelect(numbered, "ns", store.AuditQuery{Actor: "a", BeforeID: 9, Limit: 11}, time.Time{})
	if want := "SELECT " + AuditColumns + " FROM ax_audit WHERE namespace = $1 AND actor = $2 AND id < $3 ORDER BY id DESC LIMIT $4"; sql != want {
		t.Errorf("AuditSelect (by id) =\n%s\nwant\n%s", sql, want)
	}
	if len(args) != 4 || args[2] != int64(9) || args[3] != 11 {
		t.Errorf("AuditSelect (by id) args = %v", args)
	}
	cursor := at.Add(-time.Hour)
	sql, args = AuditSelect(numbered, "ns", store.AuditQuery{Target: "t", Since: at.Add(-24 * time.Hour), Until: at, BeforeID: 9, Limit: 11}, cursor)
	want := "SELECT " + AuditColumns + " FROM ax_audit WHERE namespace = $1 AND target = $2 AND at >= $3 AND at < $4" +
		" AND at <= $5 AND (at < $6 OR id < $7) ORDER BY at DESC, id DESC LIMIT $8"
	if sql != want {
		t.Errorf("AuditSelect (by time) =\n%s\nwant\n%s", sql, want)
	}
	until := time.Date(2026, 11, 30, 23, 0, 0, 1000, time.UTC)
	if len(args) != 8 || args[3] != until || args[4] != cursor || args[5] != cursor || args[6] != int64(9) || args[7] != 11 {
		t.Errorf("AuditSelect (by time) args = %v, want until %v (UTC, whole microseconds), the cursor's time twice, 9, 11", args, until)
	}
}

// KeyRange binds the prefix, then its successor when it has one, and bounds the
// range above only then.
func TestKeyRange(t *testing.T) {
	for _, c := range []struct {
		prefix, want string
		args         []any
	}{
		{"order-4", "`key` >= ?1 AND `key` < ?2", []any{"order-4", "order-5"}},
		{"a\U0010ffff", "`key` >= ?1 AND `key` < ?2", []any{"a\U0010ffff", "b"}},
		{"\U0010ffff\U0010ffff", "`key` >= ?1", []any{"\U0010ffff\U0010ffff"}}, // every valid key at or above it starts with it
	} {
		var args []any
		ph := func(v any) string { args = append(args, v); return "?" + strconv.Itoa(len(args)) }
		if got := KeyRange(ph, "`key`", c.prefix); got != c.want || !slices.Equal(args, c.args) {
			t.Errorf("KeyRange(%+q) = %s %v, want %s %v", c.prefix, got, args, c.want, c.args)
		}
	}
}
