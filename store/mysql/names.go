package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
)

// Names live in ax_names, one row per (namespace, name) ever paused or limited (see
// store.NameKeeper). The claim reads each locked task's name rule (nameRule) with the
// lock of the rows it claims: it leaves a paused name's tasks alone, and decides a
// limited name's — a concurrency or a rate limit, a key concurrency above one or a
// rate per task key — under the name's row lock (lockNames). Trigger makes a limited
// name's task due instead of claiming it (limitedName). The claim times of a rate per
// key live in ax_key_starts, one row per (namespace, name, task key), read and written
// under the key's lock (readKeyStarts, writeKeyStarts).

// nameLimits is true of a row of ax_names with a limit the claim applies under the
// name's lock: a concurrency or a rate limit, a key concurrency above one or a rate
// per task key. Its columns are unqualified: in a subquery they name the subquery's
// ax_names row.
const nameLimits = `concurrency > 0 OR rate > 0 OR key_concurrency > 1 OR key_rate > 0`

// nameRule is, in a statement over ax_tasks, what the row's name asks of a claim: -1
// when it is paused, 1 when it is limited (nameLimits), else 0. It takes one probe of
// ax_names' primary key per row, made only when some name is paused or limited — the
// EXISTS does not depend on the row, and MySQL evaluates it once per statement. A
// paused name's limits do not matter: its tasks are not claimed.
const nameRule = `IF(EXISTS (SELECT 1 FROM ax_names WHERE paused OR ` + nameLimits + `),
	COALESCE((SELECT IF(p.paused, -1, ` + nameLimits + `) FROM ax_names p WHERE p.namespace = ax_tasks.namespace AND p.name = ax_tasks.name), 0), 0)`

// limitedName is true, in a statement over ax_tasks, when the row's name is limited
// (nameLimits) in its namespace: like nameRule, one primary key probe per row, made
// only when some name is limited.
const limitedName = `(EXISTS (SELECT 1 FROM ax_names WHERE ` + nameLimits + `)
	AND EXISTS (SELECT 1 FROM ax_names l WHERE l.namespace = ax_tasks.namespace AND l.name = ax_tasks.name AND (` + nameLimits + `)))`

// nameCols are the columns of ax_names scanNameState reads.
const nameCols = `name, paused, concurrency, rate, rate_per_us, key_concurrency, key_rate, key_rate_per_us, changed_by, changed_at`

// nameSQL reads a name's state; its arguments are the namespace and the name.
const nameSQL = `SELECT ` + nameCols + ` FROM ax_names WHERE namespace = ? AND name = ?`

// PauseName pauses the task name in the view's namespace (see store.NameKeeper).
func (s *Store) PauseName(ctx context.Context, name, by string) (*store.NameState, error) {
	if err := driverkit.CheckNameState(name, by); err != nil {
		return nil, fmt.Errorf("ax: mysql: pause name %q: %w", name, err)
	}
	var st *store.NameState
	err := s.run(ctx, "pause name", 0, func(tx *sql.Tx, _ int64) error {
		// MySQL assigns left to right: changed_by and changed_at read paused before
		// it is set.
		if _, err := tx.ExecContext(ctx, `INSERT INTO ax_names (namespace, name, paused, changed_by, changed_at)
			VALUES (?, ?, TRUE, ?, UTC_TIMESTAMP(6))
			ON DUPLICATE KEY UPDATE changed_by = IF(paused, changed_by, VALUES(changed_by)),
				changed_at = IF(paused, changed_at, VALUES(changed_at)), paused = TRUE`, s.ns, name, by); err != nil {
			return err
		}
		var err error
		st, err = scanNameState(tx.QueryRowContext(ctx, nameSQL, s.ns, name))
		return err
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// ResumeName resumes the task name in the view's namespace and gives its SCHEDULED
// tasks fresh sequence numbers, in one transaction (see store.NameKeeper). The tasks
// to restamp are read first, for the sequence numbers to reserve; one submitted
// meanwhile has a fresh number of its own.
func (s *Store) ResumeName(ctx context.Context, name, by string) (*store.NameState, error) {
	if err := driverkit.CheckNameState(name, by); err != nil {
		return nil, fmt.Errorf("ax: mysql: resume name %q: %w", name, err)
	}
	if err := s.check("resume name"); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM ax_tasks WHERE namespace = ? AND name = ? AND status = 'SCHEDULED' ORDER BY id`, s.ns, name)
	if err != nil {
		return nil, s.wrap("resume name", err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, s.wrap("resume name", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.wrap("resume name", err)
	}
	st := &store.NameState{Name: name}
	err = s.run(ctx, "resume name", len(ids), func(tx *sql.Tx, seq int64) error {
		res, err := tx.ExecContext(ctx, `UPDATE ax_names SET paused = FALSE, changed_by = ?, changed_at = UTC_TIMESTAMP(6)
			WHERE namespace = ? AND name = ? AND paused`, by, s.ns, name)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 1 {
			if err := chunks(len(ids), func(lo, hi int) error {
				seqs := make([]any, hi-lo)
				for k := range seqs {
					seqs[k] = seq + int64(lo+k)
				}
				set, args := caseID(ids[lo:hi], seqs, "")
				_, err := tx.ExecContext(ctx, `UPDATE ax_tasks FORCE INDEX (PRIMARY) SET seq = `+set+`
					WHERE id IN (`+marks(hi-lo)+`) AND status = 'SCHEDULED'`, append(args, int64s(ids[lo:hi])...)...)
				return err
			}); err != nil {
				return err
			}
		}
		got, err := scanNameState(tx.QueryRowContext(ctx, nameSQL, s.ns, name))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil // never paused
		case err != nil:
			return err
		}
		st = got
		return nil
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// SetConcurrency sets the task name's concurrency limit in the view's namespace (see
// store.NameKeeper): one statement that writes the row, with who and when by the
// store's clock, only if the limit changes, and a read of the state. Removing the
// limit (0) of a name never stored writes nothing and answers the zero state.
func (s *Store) SetConcurrency(ctx context.Context, name string, n int, by string) (*store.NameState, error) {
	if err := driverkit.CheckConcurrency(name, n, by); err != nil {
		return nil, fmt.Errorf("ax: mysql: set concurrency of name %q: %w", name, err)
	}
	return s.setNameInt(ctx, "set concurrency", "concurrency", name, n, by)
}

// setNameInt sets the integer column of the task name's row to n (0: the default a
// name never stored has), as SetConcurrency describes. column is one of ax_names'
// limits, named by this package, never by a caller.
func (s *Store) setNameInt(ctx context.Context, op, column, name string, n int, by string) (*store.NameState, error) {
	st := &store.NameState{Name: name}
	err := s.run(ctx, op, 0, func(tx *sql.Tx, _ int64) error {
		var err error
		if n == 0 { // no row to create
			_, err = tx.ExecContext(ctx, `UPDATE ax_names SET `+column+` = 0, changed_by = ?, changed_at = UTC_TIMESTAMP(6)
				WHERE namespace = ? AND name = ? AND `+column+` <> 0`, by, s.ns, name)
		} else {
			// MySQL assigns left to right: changed_by and changed_at read the old value
			// before it is set.
			_, err = tx.ExecContext(ctx, `INSERT INTO ax_names (namespace, name, `+column+`, changed_by, changed_at)
				VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6))
				ON DUPLICATE KEY UPDATE changed_by = IF(`+column+` = VALUES(`+column+`), changed_by, VALUES(changed_by)),
					changed_at = IF(`+column+` = VALUES(`+column+`), changed_at, VALUES(changed_at)),
					`+column+` = VALUES(`+column+`)`, s.ns, name, n, by)
		}
		if err != nil {
			return err
		}
		got, err := scanNameState(tx.QueryRowContext(ctx, nameSQL, s.ns, name))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil // never stored, and nothing to set
		case err != nil:
			return err
		}
		st = got
		return nil
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// SetRate sets the task name's rate limit in the view's namespace (see
// store.NameKeeper): one statement that writes the row, with who and when by the
// store's clock, only if the limit (n, per) changes, and a read of the state. per is
// stored in microseconds, and as 0 with no limit (0), which also forgets the claim
// times recorded for the old limit; a changed limit keeps them, to count toward the
// new one. Removing the limit of a name never stored writes nothing and answers the
// zero state. The claims of the name read and write its claim times under its row's
// lock (lockNames), which this write takes too.
func (s *Store) SetRate(ctx context.Context, name string, n int, per time.Duration, by string) (*store.NameState, error) {
	if err := driverkit.CheckRate(name, n, per, by); err != nil {
		return nil, fmt.Errorf("ax: mysql: set rate of name %q: %w", name, err)
	}
	return s.setRate(ctx, "set rate", "rate", "rate_per_us", ", rate_starts = NULL", name, n, per, by)
}

// SetKeyRate sets the task name's rate limit per task key in the view's namespace
// (see store.NameKeeper), as SetRate sets its rate, in key_rate and key_rate_per_us.
// Removing it forgets no claim times: they are the keys' rows of ax_key_starts, as
// many as the keys ever claimed under it, which PruneKeyStarts deletes once no window
// reaches them; a rate per key set again meanwhile counts them, as a changed one
// does. The claims of the name read it under its row's lock (lockNames), which this
// write takes too.
func (s *Store) SetKeyRate(ctx context.Context, name string, n int, per time.Duration, by string) (*store.NameState, error) {
	if err := driverkit.CheckRate(name, n, per, by); err != nil {
		return nil, fmt.Errorf("ax: mysql: set key rate of name %q: %w", name, err)
	}
	return s.setRate(ctx, "set key rate", "key_rate", "key_rate_per_us", "", name, n, per, by)
}

// setRate sets the rate of the task name's row, in the columns rate and perUS, to n
// per per (0: none, per stored as 0), as SetRate describes; removing it also sets
// forget (", column = value", or empty). The columns and forget are named by this
// package, never by a caller.
func (s *Store) setRate(ctx context.Context, op, rate, perUS, forget, name string, n int, per time.Duration, by string) (*store.NameState, error) {
	if n == 0 {
		per = 0
	}
	st := &store.NameState{Name: name}
	err := s.run(ctx, op, 0, func(tx *sql.Tx, _ int64) error {
		var err error
		if n == 0 { // no row to create
			_, err = tx.ExecContext(ctx, `UPDATE ax_names SET `+rate+` = 0, `+perUS+` = 0`+forget+`, changed_by = ?, changed_at = UTC_TIMESTAMP(6)
				WHERE namespace = ? AND name = ? AND (`+rate+` <> 0 OR `+perUS+` <> 0)`, by, s.ns, name)
		} else {
			// MySQL assigns left to right: changed_by and changed_at read the old limit
			// before it is set.
			same := rate + ` = VALUES(` + rate + `) AND ` + perUS + ` = VALUES(` + perUS + `)`
			_, err = tx.ExecContext(ctx, `INSERT INTO ax_names (namespace, name, `+rate+`, `+perUS+`, changed_by, changed_at)
				VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP(6))
				ON DUPLICATE KEY UPDATE
					changed_by = IF(`+same+`, changed_by, VALUES(changed_by)),
					changed_at = IF(`+same+`, changed_at, VALUES(changed_at)),
					`+rate+` = VALUES(`+rate+`), `+perUS+` = VALUES(`+perUS+`)`, s.ns, name, n, per.Microseconds(), by)
		}
		if err != nil {
			return err
		}
		got, err := scanNameState(tx.QueryRowContext(ctx, nameSQL, s.ns, name))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil // never stored, and no limit to set
		case err != nil:
			return err
		}
		st = got
		return nil
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// SetKeyConcurrency sets how many of the task name's tasks sharing a task key may be
// DISPATCHING or RUNNING at once in the view's namespace (see store.NameKeeper): one
// statement that writes the row, with who and when by the store's clock, only if it
// changes, and a read of the state. 1, the rule of one, is stored as 0; restoring it
// on a name never stored writes nothing and answers the zero state. The claims of the
// name read it under its row's lock (lockNames), which this write takes too.
func (s *Store) SetKeyConcurrency(ctx context.Context, name string, n int, by string) (*store.NameState, error) {
	if err := driverkit.CheckConcurrency(name, n, by); err != nil {
		return nil, fmt.Errorf("ax: mysql: set key concurrency of name %q: %w", name, err)
	}
	if n == 1 {
		n = 0 // the rule of one
	}
	return s.setNameInt(ctx, "set key concurrency", "key_concurrency", name, n, by)
}

// namesSQL reads every name of a namespace (its argument, twice) with nameCols and
// the tasks in flight of each with a concurrency limit, counted as inflightSQL counts
// them: one pass over the namespace's DISPATCHING and RUNNING ranges of
// ax_tasks_status_seq, grouped by name, in the statement's one read view.
const namesSQL = `SELECT n.name, n.paused, n.concurrency, n.rate, n.rate_per_us, n.key_concurrency, n.key_rate, n.key_rate_per_us,
		n.changed_by, n.changed_at,
		IF(n.concurrency > 0, COALESCE(f.tasks, 0), 0)
	FROM ax_names n LEFT JOIN (SELECT name, COUNT(*) AS tasks FROM ax_tasks FORCE INDEX (ax_tasks_status_seq)
		WHERE namespace = ? AND status IN ('DISPATCHING', 'RUNNING') GROUP BY name ORDER BY NULL) AS f ON f.name = n.name
	WHERE n.namespace = ? ORDER BY n.name`

// Names returns the state of every name of the view's namespace ever paused or
// limited, with the slots in use of each with a concurrency limit.
func (s *Store) Names(ctx context.Context) ([]store.NameState, error) {
	if err := s.check("list names"); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, namesSQL, s.ns, s.ns)
	if err != nil {
		return nil, s.wrap("list names", err)
	}
	defer rows.Close()
	out := []store.NameState{}
	for rows.Next() {
		var st store.NameState
		var perUS, keyPerUS int64
		if err := rows.Scan(&st.Name, &st.Paused, &st.Concurrency, &st.Rate, &perUS, &st.KeyConcurrency, &st.KeyRate, &keyPerUS,
			&st.ChangedBy, dbTime{&st.ChangedAt}, &st.InFlight); err != nil {
			return nil, s.wrap("list names", err)
		}
		st.Per = time.Duration(perUS) * time.Microsecond
		st.KeyPer = time.Duration(keyPerUS) * time.Microsecond
		out = append(out, st)
	}
	return out, s.wrap("list names", rows.Err())
}

// scanNameState reads a name's state as nameSQL selects it.
func scanNameState(row scanner) (*store.NameState, error) {
	var st store.NameState
	var perUS, keyPerUS int64
	if err := row.Scan(&st.Name, &st.Paused, &st.Concurrency, &st.Rate, &perUS, &st.KeyConcurrency, &st.KeyRate, &keyPerUS,
		&st.ChangedBy, dbTime{&st.ChangedAt}); err != nil {
		return nil, err
	}
	st.Per = time.Duration(perUS) * time.Microsecond
	st.KeyPer = time.Duration(keyPerUS) * time.Microsecond
	return &st, nil
}

// inflightSQL counts, per name among n names, the tasks of a namespace DISPATCHING or
// RUNNING; its arguments are the namespace and the names. It reads the two ranges
// (namespace, status) of ax_tasks_status_seq, the narrowest index led by them, and
// each of their rows for its name: its cost is the tasks in flight in the namespace,
// whatever the number of a name's finished tasks, which a range of ax_tasks_name_key
// would read too.
func inflightSQL(n int) string {
	return `SELECT name, COUNT(*) FROM ax_tasks FORCE INDEX (ax_tasks_status_seq)
		WHERE namespace = ? AND status IN ('DISPATCHING', 'RUNNING') AND name IN (` + marks(n) + `) GROUP BY name ORDER BY NULL`
}

// lockNamesSQL locks the ax_names rows of n names of a namespace, in name order, and
// reads their limits (key concurrency and rate per key included) and their rates'
// claim times; its arguments are the namespace and the names. A locking read reads
// the rows' latest committed version, after any wait for their locks.
func lockNamesSQL(n int) string {
	return `SELECT name, concurrency, rate, rate_per_us, rate_starts, key_concurrency, key_rate, key_rate_per_us FROM ax_names
		WHERE namespace = ? AND name IN (` + marks(n) + `) ORDER BY name FOR UPDATE`
}

// lockNames locks the ax_names rows of names (distinct, ascending) in namespace ns,
// holds them until tx ends, and returns the limits of each name that has one — a
// concurrency or a rate limit, or a key concurrency above one or a rate per key, which
// the claim applies under the keys' locks, taken after these — as
// driverkit.ResolveKeys takes them (a rate per key without its keys' claim times,
// which readKeyStarts reads under the keys' locks): with
// a concurrency limit, the count of the namespace's tasks of the name DISPATCHING or
// RUNNING (read only for those names); with a rate, its claim times. Every claim of a
// limited name's tasks takes its row's lock before it counts or reads the times and
// holds it until it commits, so the count, a plain read made once every lock is
// granted, sees the claims of every claimer before it (under READ COMMITTED each
// statement reads the latest committed rows), and the times read with the lock are
// those the claimer before it wrote.
func lockNames(ctx context.Context, tx *sql.Tx, ns string, names []string) (map[string]*driverkit.NameLimit, error) {
	limits := make(map[string]*driverkit.NameLimit, len(names))
	for lo := 0; lo < len(names); lo += store.MaxBatch {
		part := names[lo:min(len(names), lo+store.MaxBatch)]
		if err := readLimits(ctx, tx, lockNamesSQL(len(part)), append([]any{ns}, texts(part)...), limits); err != nil {
			return nil, err
		}
	}
	counted := make([]string, 0, len(limits))
	for _, name := range names {
		if l := limits[name]; l != nil && l.Concurrency > 0 {
			counted = append(counted, name)
		}
	}
	inflight := make(map[string]int, len(counted))
	for lo := 0; lo < len(counted); lo += store.MaxBatch {
		part := counted[lo:min(len(counted), lo+store.MaxBatch)]
		if err := countRows(ctx, tx, inflightSQL(len(part)), append([]any{ns}, texts(part)...), inflight); err != nil {
			return nil, err
		}
	}
	for name, n := range inflight {
		limits[name].InFlight = n
	}
	return limits, nil
}

// readLimits runs q, whose rows are lockNamesSQL's, and sets in into the limits of
// each name that has one; a name without (its limits lifted since the claim read
// them) is left out.
func readLimits(ctx context.Context, tx *sql.Tx, q string, args []any, into map[string]*driverkit.NameLimit) error {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			name            string
			l               driverkit.NameLimit
			perUS, keyPerUS int64
			starts          []byte // NULL: none
		)
		if err := rows.Scan(&name, &l.Concurrency, &l.Rate, &perUS, &starts, &l.KeyConcurrency, &l.KeyRate, &keyPerUS); err != nil {
			return err
		}
		if l.Concurrency <= 0 && l.Rate <= 0 && l.KeyConcurrency <= 1 && l.KeyRate <= 0 {
			continue
		}
		if l.KeyRate > 0 {
			l.KeyPer = time.Duration(keyPerUS) * time.Microsecond
		}
		if l.Rate > 0 {
			l.Per = time.Duration(perUS) * time.Microsecond
			if l.Starts, err = driverkit.DecodeStarts(starts); err != nil {
				return fmt.Errorf("name %q: %w", name, err)
			}
		}
		into[name] = &l
	}
	return rows.Err()
}

// rated reports whether a name of limits has a rate limit.
func rated(limits map[string]*driverkit.NameLimit) bool {
	for _, l := range limits {
		if l.Rate > 0 {
			return true
		}
	}
	return false
}

// countRows runs q, whose rows are (name, number), and sets them in into.
func countRows(ctx context.Context, tx *sql.Tx, q string, args []any, into map[string]int) error {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			return err
		}
		into[name] = n
	}
	return rows.Err()
}

// nameLimited reports whether name has a concurrency or a rate limit, or a rate per
// task key, in namespace ns, and whether it has a key concurrency above one: a plain
// read, which under READ COMMITTED sees the latest committed limits.
func nameLimited(ctx context.Context, tx *sql.Tx, ns, name string) (limited, keys bool, err error) {
	err = tx.QueryRowContext(ctx, `SELECT concurrency > 0 OR rate > 0 OR key_rate > 0, key_concurrency > 1 FROM ax_names WHERE namespace = ? AND name = ?`,
		ns, name).Scan(&limited, &keys)
	if errors.Is(err, sql.ErrNoRows) {
		return false, false, nil
	}
	return limited, keys, err
}

// maxStartsBytes bounds the claim times one statement of writeStarts carries, far
// under max_allowed_packet (16 MiB by default on MariaDB, 64 MiB on MySQL 8): a name
// at store.MaxRate has 80,000 bytes of them.
const maxStartsBytes = 1 << 20

// writeStarts stores with each name of limits whose claim times ResolveKeys changed
// (driverkit.NameLimit.Changed) its times, driverkit.EncodeStarts, in tx, which holds
// the names' row locks (lockNames) and commits them with the claims they record. One
// UPDATE, by primary key, per chunk of at most store.MaxBatch names and about
// maxStartsBytes; none when no name changed.
func writeStarts(ctx context.Context, tx *sql.Tx, ns string, limits map[string]*driverkit.NameLimit) error {
	var changed []string
	for name, l := range limits {
		if l.Changed {
			changed = append(changed, name)
		}
	}
	slices.Sort(changed) // the order in which the rows were locked
	for len(changed) > 0 {
		var set strings.Builder
		set.WriteString("CASE name")
		var args []any
		n, size := 0, 0
		for n < len(changed) && n < store.MaxBatch && (n == 0 || size < maxStartsBytes) {
			b := driverkit.EncodeStarts(limits[changed[n]].Starts)
			set.WriteString(" WHEN ? THEN ?")
			args = append(args, changed[n], b)
			n, size = n+1, size+len(b)
		}
		set.WriteString(" END")
		args = append(args, ns)
		args = append(args, texts(changed[:n])...)
		if _, err := tx.ExecContext(ctx, `UPDATE ax_names SET rate_starts = `+set.String()+`
			WHERE namespace = ? AND name IN (`+marks(n)+`)`, args...); err != nil {
			return err
		}
		changed = changed[n:]
	}
	return nil
}

// nameKey is a task name and a task key of one namespace: a row of ax_key_starts.
type nameKey struct{ name, key string }

// keyRated returns the (name, key) pairs of the tasks of keyed whose key restricts
// them (a key, and Overlap skip or queue) and whose name has a rate per task key in
// limits, once each, ascending: the keys' claim times the claim reads and may write.
func keyRated(keyed []driverkit.Keyed, limits map[string]*driverkit.NameLimit) []nameKey {
	var pairs []nameKey
	for _, k := range keyed {
		if l := limits[k.Name]; l != nil && l.KeyRate > 0 && k.TaskKey != "" && keyRules(k.Overlap) {
			pairs = append(pairs, nameKey{k.Name, k.TaskKey})
		}
	}
	slices.SortFunc(pairs, func(a, b nameKey) int { return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.key, b.key)) })
	return slices.Compact(pairs)
}

// keyStartsSQL reads the claim times of n (name, task key) pairs of a namespace; its
// arguments are the namespace and each pair's name and key. The row constructor's IN
// is a list of dives of ax_key_starts' primary key.
func keyStartsSQL(n int) string {
	return `SELECT name, task_key, starts FROM ax_key_starts WHERE namespace = ? AND (name, task_key) IN (` + pairMarks(n) + `)`
}

// deleteKeyStartsSQL deletes the rows of n (name, task key) pairs of a namespace, by
// primary key; its arguments are keyStartsSQL's.
func deleteKeyStartsSQL(n int) string {
	return `DELETE FROM ax_key_starts WHERE namespace = ? AND (name, task_key) IN (` + pairMarks(n) + `)`
}

// pairMarks is n placeholders of pairs, "(?, ?), …".
func pairMarks(n int) string {
	return strings.TrimSuffix(strings.Repeat("(?, ?),", n), ",")
}

// readKeyStarts sets in limits, the names' limits lockNames read, the claim times of
// each of pairs (keyRated) stored in ax_key_starts of namespace ns; a pair without a
// row has none. It is a plain read, made after lockKeys: every claim of a key's tasks
// holds the key's lock until it commits, and writes its times before (writeKeyStarts),
// so under READ COMMITTED the read sees the times the key's previous claimer wrote. A
// row PruneKeyStarts deletes meanwhile held times no window reaches.
func readKeyStarts(ctx context.Context, tx *sql.Tx, ns string, pairs []nameKey, limits map[string]*driverkit.NameLimit) error {
	for lo := 0; lo < len(pairs); lo += store.MaxBatch {
		part := pairs[lo:min(len(pairs), lo+store.MaxBatch)]
		args := make([]any, 0, 1+2*len(part))
		args = append(args, ns)
		for _, p := range part {
			args = append(args, p.name, p.key)
		}
		if err := scanKeyStarts(ctx, tx, keyStartsSQL(len(part)), args, limits); err != nil {
			return err
		}
	}
	return nil
}

// scanKeyStarts runs q, whose rows are keyStartsSQL's, and sets their times in the
// limits of their names.
func scanKeyStarts(ctx context.Context, tx *sql.Tx, q string, args []any, limits map[string]*driverkit.NameLimit) error {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name, key string
		var b []byte
		if err := rows.Scan(&name, &key, &b); err != nil {
			return err
		}
		if err := driverkit.SetKeyStarts(limits, name, key, b); err != nil {
			return err
		}
	}
	return rows.Err()
}

// writeKeyStarts stores in ax_key_starts of namespace ns the claim times of each key
// ResolveKeys changed (driverkit.NameLimit.KeyChanged) of the names of limits,
// driverkit.EncodeStarts, with the last of them as last_at, in tx, which holds the
// keys' locks (lockKeys) and commits them with the claims they record. One INSERT …
// ON DUPLICATE KEY UPDATE per chunk of at most store.MaxBatch keys and about
// maxStartsBytes, in (name, key) order; none when no key changed. A multi-row upsert
// is safe here from MariaDB's race with an insert of the same key (see DESIGN.md,
// "The execution path"): every writer of a row holds its key's lock.
func writeKeyStarts(ctx context.Context, tx *sql.Tx, ns string, limits map[string]*driverkit.NameLimit) error {
	var changed []nameKey
	for name, l := range limits {
		for _, k := range l.KeyChanged {
			changed = append(changed, nameKey{name, k})
		}
	}
	slices.SortFunc(changed, func(a, b nameKey) int { return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.key, b.key)) })
	for len(changed) > 0 {
		var args []any
		n, size := 0, 0
		for n < len(changed) && n < store.MaxBatch && (n == 0 || size < maxStartsBytes) {
			p := changed[n]
			starts := limits[p.name].KeyStarts[p.key]
			b := driverkit.EncodeStarts(starts)
			args = append(args, ns, p.name, p.key, b, dt(starts[len(starts)-1]))
			n, size = n+1, size+len(b)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO ax_key_starts (namespace, name, task_key, starts, last_at)
			VALUES `+strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?),", n), ",")+`
			ON DUPLICATE KEY UPDATE starts = VALUES(starts), last_at = VALUES(last_at)`, args...); err != nil {
			return err
		}
		changed = changed[n:]
	}
	return nil
}

// oldKeyStartsSQL locks up to a limit of a namespace's rows of ax_key_starts whose
// last claim is at least a number of microseconds before the store's time, oldest
// first, found on ax_key_starts_last; its arguments are the namespace, the
// microseconds and the limit. SKIP LOCKED passes over a row a claim of its key is
// writing: that claim makes it fresh, and the prune neither waits for it nor, holding
// others, deadlocks with it.
const oldKeyStartsSQL = `SELECT name, task_key FROM ax_key_starts WHERE namespace = ? AND last_at <= UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
	ORDER BY last_at LIMIT ? FOR UPDATE SKIP LOCKED`

// PruneKeyStarts deletes up to limit rows of ax_key_starts of the view's namespace
// whose last claim is at least store.MaxRatePer before the store's time, so that no
// window of a rate per key reaches them (see store.Pruner), in one transaction: the
// rows are locked (oldKeyStartsSQL), then deleted by primary key
// (deleteKeyStartsSQL).
func (s *Store) PruneKeyStarts(ctx context.Context, limit int) (int, error) {
	if limit < 1 || limit > store.MaxPrune {
		return 0, fmt.Errorf("ax: mysql: prune key starts: limit %d is outside 1..%d: %w", limit, store.MaxPrune, store.ErrInvalid)
	}
	var n int
	err := s.run(ctx, "prune key starts", 0, func(tx *sql.Tx, _ int64) error {
		n = 0
		rows, err := tx.QueryContext(ctx, oldKeyStartsSQL, s.ns, store.MaxRatePer.Microseconds(), limit)
		if err != nil {
			return err
		}
		args := []any{s.ns}
		for rows.Next() {
			var name, key string
			if err := rows.Scan(&name, &key); err != nil {
				rows.Close()
				return err
			}
			args = append(args, name, key)
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(args) == 1 {
			return err
		}
		res, err := tx.ExecContext(ctx, deleteKeyStartsSQL((len(args)-1)/2), args...)
		if err != nil {
			return err
		}
		deleted, err := res.RowsAffected()
		n = int(deleted)
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
