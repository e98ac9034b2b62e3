// Package taskquery writes the SQL of store.Store's Tasks and CountTasks for the SQL
// drivers, so that the three agree on what a query selects: the conditions, the
// keyset cursor, the order and the limit. Each driver gives its dialect: how it
// writes a placeholder, binds a time and matches a key prefix.
package taskquery

import (
	"database/sql"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// Dialect is what differs between the SQL drivers.
type Dialect struct {
	// Placeholder writes the nth (1-based) placeholder: "$1" or "?".
	Placeholder func(n int) string
	// Time binds a time as the driver stores it.
	Time func(t time.Time) any
	// Prefix returns the condition "the business key starts with prefix" (KeyRange,
	// where the key compares bytes), binding its arguments through ph, which returns
	// each one's placeholder.
	Prefix func(ph func(v any) string, prefix string) string
}

// Select returns the statement of Tasks: columns from table (ax_tasks, perhaps with
// an alias; the conditions name its columns unqualified) of namespace ns that q
// selects, in q's order, from after q.After, LIMIT q.Limit; and its arguments. q must
// have been checked (store.CheckTaskQuery). The statuses are written as literals, so
// that a planner can match them to a partial index's predicate (SQLite cannot
// through a placeholder).
func Select(d Dialect, columns, table, ns string, q store.TaskQuery) (string, []any) {
	var args []any
	ph := func(v any) string {
		args = append(args, v)
		return d.Placeholder(len(args))
	}
	conds := []string{"namespace = " + ph(ns)}
	if len(q.Statuses) > 0 {
		in := make([]string, len(q.Statuses))
		for i, st := range q.Statuses {
			in[i] = "'" + string(st) + "'" // valid statuses only (checked): constants
		}
		if len(in) == 1 {
			conds = append(conds, "status = "+in[0]) // the very term of a partial index's predicate
		} else {
			conds = append(conds, "status IN ("+strings.Join(in, ", ")+")")
		}
	}
	if q.Name != "" {
		conds = append(conds, "name = "+ph(q.Name))
	}
	if q.KeyPrefix != "" {
		conds = append(conds, d.Prefix(ph, q.KeyPrefix))
	}
	if q.OwnerService != "" {
		conds = append(conds, "owner_service = "+ph(q.OwnerService))
	}
	if q.TaskKey != "" {
		conds = append(conds, "task_key = "+ph(q.TaskKey))
	}
	for _, r := range []struct {
		col      string
		from, to time.Time
	}{{"due_at", q.DueFrom, q.DueBefore}, {"finished_at", q.FinishedFrom, q.FinishedBefore}} {
		if !r.from.IsZero() {
			conds = append(conds, r.col+" >= "+ph(d.Time(r.from)))
		}
		if !r.to.IsZero() {
			conds = append(conds, r.col+" < "+ph(d.Time(r.to)))
		}
	}
	order := "id DESC"
	if q.Soonest {
		order = "due_at, id"
	}
	if c := q.After; c != nil {
		if q.Soonest {
			at := d.Time(c.DueAt)
			conds = append(conds, "(due_at > "+ph(at)+" OR (due_at = "+ph(at)+" AND id > "+ph(c.ID)+"))")
		} else {
			conds = append(conds, "id < "+ph(c.ID))
		}
	}
	return "SELECT " + columns + " FROM " + table + " WHERE " + strings.Join(conds, " AND ") +
		" ORDER BY " + order + " LIMIT " + ph(q.Limit), args
}

// Count returns the statement of CountTasks: one row (status, count) per status with
// tasks in namespace ns, each count stopping at atMost + 1, so that each reads at
// most atMost + 1 index entries; and its arguments.
func Count(d Dialect, ns string, atMost int64) (string, []any) {
	var args []any
	ph := func(v any) string {
		args = append(args, v)
		return d.Placeholder(len(args))
	}
	parts := make([]string, 0, len(store.Statuses()))
	for _, st := range store.Statuses() {
		lit := "'" + string(st) + "'" // one of the constants: nothing to quote
		parts = append(parts, "SELECT "+lit+" AS status, (SELECT count(*) FROM (SELECT 1 FROM ax_tasks WHERE namespace = "+
			ph(ns)+" AND status = "+lit+" LIMIT "+ph(atMost+1)+") c) AS n")
	}
	return strings.Join(parts, " UNION ALL "), args
}

// KeyRange returns the condition "col starts with prefix" as the range it is in byte
// order: col >= prefix AND col < Successor(prefix), or col >= prefix alone when there
// is no successor. Without one, prefix is U+10FFFF runes only, and a valid UTF-8
// string at or above it starts with it, so the condition is exact for a column of
// valid UTF-8 that compares bytes (or code points). ph binds each argument and
// returns its placeholder.
func KeyRange(ph func(v any) string, col, prefix string) string {
	cond := col + " >= " + ph(prefix)
	if next, ok := Successor(prefix); ok {
		cond += " AND " + col + " < " + ph(next)
	}
	return cond
}

// Successor returns the least valid UTF-8 string above every string that starts with
// prefix, in byte order, and true; or false when there is none (see KeyRange).
//
// The successor is prefix with its last rune replaced by the next code point; the
// surrogates U+D800–U+DFFF, which UTF-8 cannot encode, are skipped. A last rune
// U+10FFFF has no next code point: it is dropped, and the rune before it is
// incremented instead. A prefix of U+10FFFF runes only has no successor. UTF-8's byte
// order is code-point order, so no valid string lies between prefix's strings and
// the successor. Incrementing the last byte instead would make invalid UTF-8 (after
// U+007F, U+00BF, U+07FF…), which PostgreSQL refuses as text.
//
// prefix must be valid UTF-8 (store.CheckTaskQuery).
func Successor(prefix string) (string, bool) {
	for prefix != "" {
		r, size := utf8.DecodeLastRuneInString(prefix)
		prefix = prefix[:len(prefix)-size]
		switch {
		case r == utf8.MaxRune:
			continue
		case r == 0xD7FF: // the next ones are the surrogates
			r = 0xE000
		default:
			r++
		}
		return prefix + string(r), true
	}
	return "", false
}

// ReadCounts reads the rows of Count's statement through database/sql (SQLite,
// MySQL): every status present, zero included.
func ReadCounts(rows *sql.Rows, err error) (map[store.Status]int64, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	counts := driverkit.NewTaskStats().Counts
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		counts[store.Status(st)] = n
	}
	return counts, rows.Err()
}

// AuditColumns are the columns AuditSelect reads, in the order of store.AuditRecord's
// fields.
const AuditColumns = `id, at, actor, role, action, target, reason, result, status_before, status_after, execution_id`

// AuditSelect returns the statement of Auditor.AuditLog: AuditColumns of the records
// of namespace ns that q selects (its fields matched exactly), newest first, LIMIT
// q.Limit; and its arguments. q must have been checked (driverkit.CheckAuditQuery).
//
// Without a time bound the records come by id descending, from below q.BeforeID.
// With one (q.ByTime) they come by (at, id) descending, within the bounds (truncated
// to microseconds, driverkit.AuditBound): a backward range scan of ax_audit_at
// (namespace, at). SQLite's and InnoDB's entries end with the id, so they come in
// that order; PostgreSQL sorts the few rows of each at, incrementally. A positive
// q.BeforeID then continues after that record, whose at the driver read first
// (cursorAt): at <= cursorAt bounds the range, and of the rows at cursorAt only those
// below BeforeID are kept.
func AuditSelect(d Dialect, ns string, q store.AuditQuery, cursorAt time.Time) (string, []any) {
	args := []any{ns}
	where := []string{"namespace = " + d.Placeholder(1)}
	ph := func(v any) string {
		args = append(args, v)
		return d.Placeholder(len(args))
	}
	if q.Actor != "" {
		where = append(where, "actor = "+ph(q.Actor))
	}
	if q.Action != "" {
		where = append(where, "action = "+ph(q.Action))
	}
	if q.Target != "" {
		where = append(where, "target = "+ph(q.Target))
	}
	order := " ORDER BY id DESC LIMIT "
	if q.ByTime() {
		if !q.Since.IsZero() {
			where = append(where, "at >= "+ph(d.Time(driverkit.AuditBound(q.Since))))
		}
		if !q.Until.IsZero() {
			where = append(where, "at < "+ph(d.Time(driverkit.AuditBound(q.Until))))
		}
		if q.BeforeID > 0 {
			at := d.Time(cursorAt)
			where = append(where, "at <= "+ph(at), "(at < "+ph(at)+" OR id < "+ph(q.BeforeID)+")")
		}
		order = " ORDER BY at DESC, id DESC LIMIT "
	} else if q.BeforeID > 0 {
		where = append(where, "id < "+ph(q.BeforeID))
	}
	limit := ph(q.Limit)
	return "SELECT " + AuditColumns + " FROM ax_audit WHERE " + strings.Join(where, " AND ") + order + limit, args
}

// ScanIDs reads rows of one id column through database/sql, as the arguments of an
// IN list of as many placeholders.
func ScanIDs(rows *sql.Rows, err error) ([]any, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []any
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
