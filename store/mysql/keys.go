package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"maps"
	"slices"
	"time"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// Task keys (see DESIGN.md, "Task keys"): a due task whose Overlap is skip or
// queue is claimed only while no other task of its namespace with its key is
// DISPATCHING or RUNNING — or, when its name has a key concurrency n above one, while
// fewer than n are. Claim and Trigger decide it under the key's lock row in
// ax_task_keys, (namespace, task_key), taken after the task rows (and, in Claim, the
// limited names' rows) and in ascending key order, then read the namespace's holders
// through the ax_tasks_held_key index (namespace, held_key) and repeat the condition
// in the claiming UPDATE. Two namespaces using one task key neither see nor wait for
// each other.

// keyRules reports whether a task with this policy is subject to the key rule: a task
// without a key has no policy, and allow ignores the key.
func keyRules(p store.OverlapPolicy) bool {
	return p == store.OverlapSkip || p == store.OverlapQueue
}

// lockKeys locks the ax_task_keys rows of keys (distinct, ascending) in namespace ns,
// creating the missing ones, and holds them until tx ends. Existing rows are locked by one
// SELECT … FOR UPDATE per chunk, in key order. A key seen for the first time gets its
// row from a single-row INSERT … ON DUPLICATE KEY UPDATE, which locks the row
// exclusively whether it inserts it or finds it inserted meanwhile: INSERT IGNORE
// would take a shared lock on a duplicate, and two claimers upgrading theirs would
// deadlock; a multi-row ON DUPLICATE KEY UPDATE can drop rows on MariaDB (see
// DESIGN.md, "The execution path").
func lockKeys(ctx context.Context, tx *sql.Tx, ns string, keys []string) error {
	for lo := 0; lo < len(keys); lo += store.MaxBatch {
		part := keys[lo:min(len(keys), lo+store.MaxBatch)]
		rows, err := tx.QueryContext(ctx, `SELECT task_key FROM ax_task_keys WHERE namespace = ? AND task_key IN (`+marks(len(part))+`)
			ORDER BY task_key FOR UPDATE`, append([]any{ns}, texts(part)...)...)
		if err != nil {
			return err
		}
		found := make(map[string]bool, len(part))
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				rows.Close()
				return err
			}
			found[k] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, k := range part {
			if found[k] {
				continue
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO ax_task_keys (namespace, task_key) VALUES (?, ?)
				ON DUPLICATE KEY UPDATE task_key = task_key`, ns, k); err != nil {
				return err
			}
		}
	}
	return nil
}

// holdersSQL reads, for n keys of a namespace (its arguments: the namespace and the
// keys), each key held by a DISPATCHING or RUNNING task of the namespace, the lowest
// id of such a task and, with count, how many there are; without, 1. Grouping by
// (namespace, held_key), a prefix of ax_tasks_held_key, lets the optimizer answer
// MIN(id) with one index dive per key (a loose index scan) however many holders a key
// has; COUNT(*) reads each holder's index entry instead, which is why only the keys
// that need it are counted. ORDER BY NULL spares MariaDB the sort its GROUP BY implies.
func holdersSQL(n int, count bool) string {
	held := "1"
	if count {
		held = "COUNT(*)"
	}
	return `SELECT held_key, MIN(id), ` + held + ` FROM ax_tasks WHERE namespace = ? AND held_key IN (` + marks(n) + `)
		GROUP BY namespace, held_key ORDER BY NULL`
}

// holders returns, for each of keys held by a DISPATCHING or RUNNING task of namespace
// ns, the lowest id of such a task and how many there are — counted for the keys of
// counted only, those a task of the claim may share with others (its name's key
// concurrency is above one); for the others 1, which is all a task admitting one
// holder needs to know. It is a plain read: under READ COMMITTED it sees the latest
// committed rows, so, run after lockKeys, it sees every claim of those keys made
// before the lock was granted.
func holders(ctx context.Context, tx *sql.Tx, ns string, keys []string, counted map[string]bool) (map[string]driverkit.KeyHold, error) {
	held := make(map[string]driverkit.KeyHold)
	var plain, count []string
	for _, k := range keys {
		if counted[k] {
			count = append(count, k)
		} else {
			plain = append(plain, k)
		}
	}
	for _, c := range []bool{false, true} {
		keys := plain
		if c {
			keys = count
		}
		for lo := 0; lo < len(keys); lo += store.MaxBatch {
			part := keys[lo:min(len(keys), lo+store.MaxBatch)]
			if err := readHolders(ctx, tx, holdersSQL(len(part), c), append([]any{ns}, texts(part)...), held); err != nil {
				return nil, err
			}
		}
	}
	return held, nil
}

// readHolders runs q, whose rows are holdersSQL's, and sets them in into.
func readHolders(ctx context.Context, tx *sql.Tx, q string, args []any, into map[string]driverkit.KeyHold) error {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var h driverkit.KeyHold
		if err := rows.Scan(&k, &h.First, &h.Count); err != nil {
			return err
		}
		into[k] = h
	}
	return rows.Err()
}

// unheld is the claiming UPDATE's key condition for n keys and winners admitting
// admits holders of their keys (their names' key concurrency, at least one): the row's
// task key is held by fewer than admits DISPATCHING or RUNNING tasks of the namespace
// — by none, for one. Its arguments are the namespace, the keys and, above one,
// admits. MySQL refuses a subquery on the table being updated (error 1093) unless it
// reads a materialised derived table; GROUP BY keeps the optimizer from merging it
// back into the outer query (and reads it as holdersSQL does: for one, one index dive
// per key).
func unheld(n, admits int) string {
	having := ""
	if admits > 1 {
		having = ` HAVING COUNT(*) >= ?`
	}
	return ` AND task_key NOT IN (SELECT held_key FROM (SELECT held_key FROM ax_tasks WHERE namespace = ? AND held_key IN (` + marks(n) +
		`) GROUP BY namespace, held_key` + having + ` ORDER BY NULL) AS held)`
}

// keyAdmits is how many holders of its key a task of a name with limits l admits: its
// key concurrency, at least one (l nil: the name has no limit).
func keyAdmits(l *driverkit.NameLimit) int {
	if l == nil {
		return 1
	}
	return max(l.KeyConcurrency, 1)
}

// distinctKeys returns the task keys of the tasks of keyed whose key restricts them
// (driverkit.Keyed: a key, and Overlap skip or queue), once each, ascending: the order
// in which they are locked.
func distinctKeys(keyed []driverkit.Keyed) []string {
	keys := make([]string, 0, len(keyed))
	for _, k := range keyed {
		if keyRules(k.Overlap) {
			keys = append(keys, k.TaskKey)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// claimKeyed decides the due SCHEDULED tasks of keyed, whose rows (of namespace ns) tx
// has locked and which a claim cannot simply take: their Overlap is skip or queue, or
// their name, one of limited (ascending), had a concurrency or a rate limit, a key
// concurrency above one or a rate per task key, when their rows were locked, or both.
// It locks the names' rows and reads their limits, the tasks in flight and the rates'
// claim times (lockNames), then locks the keys and reads their holders, counted for
// the keys a name's key concurrency lets several hold, and the claim times of the
// keys whose name has a rate per key (readKeyStarts) — names before keys, each in
// ascending order, after the rows, as every claimer does, so that claimers queue
// rather than deadlock — lets driverkit.ResolveKeys decide, and writes the outcome:
// winners DISPATCHING (the UPDATE of those whose key rules repeats "fewer holders than
// the task admits" in its WHERE clause), skip losers SKIPPED with
// driverkit.SkipReason, queue losers unchanged and reported Blocked, and those their
// name's limits hold back unchanged and reported Limited (with their key when it was
// the rate per key); the rates' new claim times go back to the names' rows
// (writeStarts) and to the keys' rows of ax_key_starts (writeKeyStarts).
//
// now is the database time the rows were found due at; it stamps the changed rows.
// With a rate-limited name among limits, or a task whose name has a rate per key, the
// claim's time is instead the store's, read once every lock is granted: the rate
// counts the claims in a window ending at it, and it stamps the winners'
// DispatchedAt, the time the rate records. Each claim of the name (of the key) reads
// it after the previous one committed (its lock held until then), so the name's (the
// key's) claim times grow with the claims, in every process.
func claimKeyed(ctx context.Context, tx *sql.Tx, ns string, keyed []driverkit.Keyed, limited []string, execs map[int64]string, now time.Time, res *store.ClaimResult) error {
	limits, err := lockNames(ctx, tx, ns, limited)
	if err != nil {
		return err
	}
	keys := distinctKeys(keyed)
	if err := lockKeys(ctx, tx, ns, keys); err != nil {
		return err
	}
	var counted map[string]bool // the keys a task admits others beside
	for _, k := range keyed {
		if keyRules(k.Overlap) && keyAdmits(limits[k.Name]) > 1 {
			if counted == nil {
				counted = map[string]bool{}
			}
			counted[k.TaskKey] = true
		}
	}
	held, err := holders(ctx, tx, ns, keys, counted)
	if err != nil {
		return err
	}
	pairs := keyRated(keyed, limits)
	if err := readKeyStarts(ctx, tx, ns, pairs, limits); err != nil {
		return err
	}
	if rated(limits) || len(pairs) > 0 {
		if err := tx.QueryRowContext(ctx, `SELECT UTC_TIMESTAMP(6)`).Scan(dbTime{&now}); err != nil {
			return err
		}
	}
	claim, skip, block, limit := driverkit.ResolveKeys(keyed, held, limits, now)
	ts := dt(now)
	// Winners, in id order: as many per key as its holders leave room for, within
	// their names' free slots. Those whose key rules are claimed apart, with "fewer
	// holders than the task admits" in the UPDATE, grouped by what they admit; the
	// others (no key rule, their name limited) have nothing more to check. The groups
	// go in ascending order of admits: an UPDATE counts among a key's holders the
	// winners its transaction claimed before, and ResolveKeys let each winner in while
	// the holders, those before it included, numbered fewer than it admits — in that
	// order, the winners claimed before one of a group, of groups admitting fewer or of
	// its own, leave it room as they did there.
	ruled := map[int][]driverkit.Keyed{}
	var unruled []driverkit.Keyed
	for _, k := range claim {
		if keyRules(k.Overlap) {
			a := keyAdmits(limits[k.Name])
			ruled[a] = append(ruled[a], k)
		} else {
			unruled = append(unruled, k)
		}
	}
	for _, a := range slices.Sorted(maps.Keys(ruled)) {
		if err := dispatchKeyed(ctx, tx, ns, ruled[a], execs, ts, a); err != nil {
			return err
		}
	}
	if err := dispatchKeyed(ctx, tx, ns, unruled, execs, ts, 0); err != nil {
		return err
	}
	// The rates' claim times, winners added: a winner its UPDATE left SCHEDULED (see
	// below) still counts, which only errs on the side of fewer claims.
	if err := writeStarts(ctx, tx, ns, limits); err != nil {
		return err
	}
	if err := writeKeyStarts(ctx, tx, ns, limits); err != nil {
		return err
	}
	// Skip losers: SKIPPED, naming the task that holds (or just won) the key.
	err = chunks(len(skip), func(lo, hi int) error {
		part := skip[lo:hi]
		ids := make([]int64, len(part))
		reasons := make([]any, len(part))
		for i, k := range part {
			ids[i], reasons[i] = k.ID, driverkit.SkipReason(k.TaskKey, k.Holder)
		}
		reasonCase, args := caseID(ids, reasons, "")
		args = append([]any{ts, ts}, args...)
		args = append(args, int64s(ids)...)
		args = append(args, ts)
		_, err := tx.ExecContext(ctx, `UPDATE ax_tasks FORCE INDEX (PRIMARY) SET status = 'SKIPPED', finished_at = ?, updated_at = ?,
			last_error = `+reasonCase+`
			WHERE id IN (`+marks(len(ids))+`) AND status = 'SCHEDULED' AND due_at <= ?`, args...)
		return err
	})
	if err != nil {
		return err
	}
	// Read the changed rows back. A winner whose key rules that the UPDATE left
	// SCHEDULED (holders that slipped past the lock, which only a writer not taking
	// it could cause) is reported Blocked: due, waiting for its key; any other winner
	// left SCHEDULED is reported Limited.
	won := make(map[int64]driverkit.Keyed, len(claim))
	ids := make([]int64, 0, len(claim)+len(skip))
	for _, k := range claim {
		won[k.ID] = k
		ids = append(ids, k.ID)
	}
	for _, k := range skip {
		ids = append(ids, k.ID)
	}
	slices.Sort(ids)
	err = chunks(len(ids), func(lo, hi int) error {
		tasks, err := selectTasks(ctx, tx, ids[lo:hi])
		if err != nil {
			return err
		}
		for _, t := range tasks {
			switch k := won[t.ID]; {
			case t.Status == store.Dispatching:
				res.Claimed = append(res.Claimed, t)
			case t.Status == store.Skipped:
				res.Skipped = append(res.Skipped, t)
			case t.Status != store.Scheduled:
			case keyRules(k.Overlap):
				block = append(block, k)
			default:
				if l := limits[k.Name]; l != nil {
					k.Limit = cmp.Or(l.Concurrency, l.Rate)
				}
				limit = append(limit, k)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	byID := func(a, b driverkit.Keyed) int { return cmp.Compare(a.ID, b.ID) }
	slices.SortFunc(res.Claimed, func(a, b store.Task) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(block, byID)
	slices.SortFunc(limit, byID)
	for _, k := range block {
		res.Blocked = append(res.Blocked, store.Blocked{Due: store.Due{ID: k.ID, DueAt: k.DueAt}, TaskKey: k.TaskKey})
	}
	for _, k := range limit {
		l := store.Limited{Due: store.Due{ID: k.ID, DueAt: k.DueAt}, Name: k.Name, Limit: k.Limit, RetryAt: k.RetryAt}
		if k.KeyLimited {
			l.TaskKey = k.TaskKey // its name's rate per key held it back
		}
		res.Limited = append(res.Limited, l)
	}
	return nil
}

// dispatchKeyed moves the winners won (of namespace ns, their rows locked by tx) to
// DISPATCHING with their execution ids, stamped ts, chunk by chunk. With admits above
// 0, their keys rule (skip, queue), each admits that many holders of its key, and the
// UPDATE repeats "fewer holders than admits" of their keys in its WHERE clause (unheld).
func dispatchKeyed(ctx context.Context, tx *sql.Tx, ns string, won []driverkit.Keyed, execs map[int64]string, ts string, admits int) error {
	return chunks(len(won), func(lo, hi int) error {
		part := won[lo:hi]
		ids := make([]int64, len(part))
		vals := make([]any, len(part))
		for i, k := range part {
			ids[i], vals[i] = k.ID, execs[k.ID]
		}
		execCase, args := caseID(ids, vals, "")
		args = append(args, ts, ts)
		args = append(args, int64s(ids)...)
		args = append(args, ts)
		cond := ""
		if admits > 0 {
			keys := distinctKeys(part) // the winners' keys
			cond = unheld(len(keys), admits)
			args = append(args, ns)
			args = append(args, texts(keys)...)
			if admits > 1 {
				args = append(args, admits)
			}
		}
		_, err := tx.ExecContext(ctx, `UPDATE ax_tasks FORCE INDEX (PRIMARY) SET status = 'DISPATCHING', execution_id = `+execCase+`,
			dispatched_at = ?, updated_at = ?
			WHERE id IN (`+marks(len(ids))+`) AND status = 'SCHEDULED' AND due_at <= ?`+cond, args...)
		return err
	})
}

// triggerHeld is Trigger for a task of the view's namespace that Trigger's plain
// transition left alone although it may be SCHEDULED or FAILED: its key rules (skip,
// queue), or its name has a concurrency or a rate limit, a key concurrency above one
// or a rate per task key (or had, when the transition read it). It locks the task's row and reads its name's
// limits. A task whose name has a key concurrency above one is made due, its key free
// or not, for a claim to count the key's holders. Else, if its key rules, it locks the
// key and reads its holder — rows, then keys, as in Claim — and changes nothing while
// another task holds the key. Else a limited name's task is made due as MakeDue does
// (makeDueSet), with the sequence number reserve gives, and left for a claim to apply
// the limit; any other task is triggered, with "no holder" in the UPDATE's WHERE
// clause if its key rules. It returns the task as it is then, the holder's id when
// the key was held, and whether the transition applied.
func (s *Store) triggerHeld(ctx context.Context, tx *sql.Tx, id int64, executionID string, reserve func() (int64, error)) (*store.Task, int64, bool, error) {
	t, err := scanTask(tx.QueryRowContext(ctx, getSQL+` FOR UPDATE`, id, s.ns))
	if err != nil {
		return nil, 0, false, err
	}
	if t.Status != store.Scheduled && t.Status != store.Failed || t.Superseded {
		return t, 0, false, nil
	}
	limited, keys, err := nameLimited(ctx, tx, s.ns, t.Name)
	if err != nil {
		return nil, 0, false, err
	}
	ruled := keyRules(t.Overlap) && !keys
	if ruled {
		if err := lockKeys(ctx, tx, s.ns, []string{t.TaskKey}); err != nil {
			return nil, 0, false, err
		}
		held, err := holders(ctx, tx, s.ns, []string{t.TaskKey}, nil)
		if err != nil {
			return nil, 0, false, err
		}
		if h, busy := held[t.TaskKey]; busy {
			return t, h.First, false, nil
		}
	}
	var res sql.Result
	switch {
	case limited || keys:
		seq, err := reserve()
		if err != nil {
			return nil, 0, false, err
		}
		res, err = tx.ExecContext(ctx, makeDueSet, seq, id, s.ns)
		if err != nil {
			return nil, 0, false, err
		}
	case ruled:
		if res, err = tx.ExecContext(ctx, triggerSet+` AND overlap IN ('skip', 'queue')`+unheld(1, 1), executionID, id, s.ns, s.ns, t.TaskKey); err != nil {
			return nil, 0, false, err
		}
	default:
		if res, err = tx.ExecContext(ctx, triggerSet, executionID, id, s.ns); err != nil {
			return nil, 0, false, err
		}
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, 0, false, err
	}
	if t, err = scanTask(tx.QueryRowContext(ctx, getSQL, id, s.ns)); err != nil {
		return nil, 0, false, err
	}
	return t, 0, n == 1, nil
}

// texts returns ss as query arguments.
func texts(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
