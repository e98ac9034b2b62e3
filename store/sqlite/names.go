package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
)

// Names live in ax_names, one row per (namespace, name) ever paused or limited (see
// store.NameKeeper); the claim statements leave a paused or limited name's tasks to
// the claim's restricted path (restrictedName), which leaves a paused name's alone and
// applies a limited name's limits: concurrency, rate, key concurrency and rate per
// key.

// restrictedName is true, in a statement over ax_tasks, when the row's name is paused
// or limited in its namespace (a concurrency or a rate limit, a key concurrency above
// one or a rate per key): one probe of ax_names' primary key per row, made only when some name
// of the view's namespace (the ? it binds) is paused or limited — the first EXISTS
// does not depend on the row, and SQLite evaluates it once per statement, so a
// namespace without such names pays one probe per statement.
const restrictedName = `(EXISTS (SELECT 1 FROM ax_names r WHERE r.namespace = ?
		AND (r.paused OR r.concurrency > 0 OR r.rate > 0 OR r.key_concurrency > 1 OR r.key_rate > 0))
	AND EXISTS (SELECT 1 FROM ax_names p WHERE p.namespace = ax_tasks.namespace AND p.name = ax_tasks.name
		AND (p.paused OR p.concurrency > 0 OR p.rate > 0 OR p.key_concurrency > 1 OR p.key_rate > 0)))`

// nameColumns are the columns of ax_names scanNameState reads.
const nameColumns = `name, paused, concurrency, rate, rate_per_us, key_concurrency, key_rate, key_rate_per_us, changed_by, changed_at`

// nameSQL reads one name's state (the primary key).
const nameSQL = `SELECT ` + nameColumns + ` FROM ax_names WHERE namespace = ? AND name = ?`

// PauseName pauses the task name in the view's namespace (see store.NameKeeper).
func (s *Store) PauseName(ctx context.Context, name, by string) (*store.NameState, error) {
	if err := driverkit.CheckNameState(name, by); err != nil {
		return nil, fmt.Errorf("ax: sqlite: pause name %q: %w", name, err)
	}
	var st *store.NameState
	err := s.write(ctx, "pause name", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO ax_names (namespace, name, paused, changed_by, changed_at) VALUES (?, ?, 1, ?, ?)
			ON CONFLICT (namespace, name) DO UPDATE SET paused = 1, changed_by = excluded.changed_by, changed_at = excluded.changed_at
			WHERE NOT paused`, s.ns, name, by, micros(now())); err != nil {
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
// tasks fresh sequence numbers, in one transaction (see store.NameKeeper).
func (s *Store) ResumeName(ctx context.Context, name, by string) (*store.NameState, error) {
	if err := driverkit.CheckNameState(name, by); err != nil {
		return nil, fmt.Errorf("ax: sqlite: resume name %q: %w", name, err)
	}
	st := &store.NameState{Name: name}
	err := s.write(ctx, "resume name", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE ax_names SET paused = 0, changed_by = ?, changed_at = ?
			WHERE namespace = ? AND name = ? AND paused`, by, micros(now()), s.ns, name)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 1 {
			if err := s.restamp(ctx, tx, name); err != nil {
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

// restamp gives the SCHEDULED tasks of name fresh sequence numbers, in id order, so
// that the refill's cursor finds them again.
func (s *Store) restamp(ctx context.Context, tx *sql.Tx, name string) error {
	rows, err := tx.QueryContext(ctx, `SELECT id FROM ax_tasks WHERE namespace = ? AND name = ? AND status = 'SCHEDULED' ORDER BY id`, s.ns, name)
	if err != nil {
		return err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	seq, err := nextSeq(ctx, tx, len(ids))
	if err != nil {
		return err
	}
	for i, id := range ids {
		if _, err := tx.ExecContext(ctx, `UPDATE ax_tasks SET seq = ? WHERE id = ?`, seq+int64(i), id); err != nil {
			return err
		}
	}
	return nil
}

// SetConcurrency sets the task name's concurrency limit in the view's namespace (see
// store.NameKeeper): it writes the row only when the limit changes, and a name never
// stored is not stored for a limit of 0. The claims that begin after the commit apply
// it: they read it in their own write transaction.
func (s *Store) SetConcurrency(ctx context.Context, name string, n int, by string) (*store.NameState, error) {
	if err := driverkit.CheckConcurrency(name, n, by); err != nil {
		return nil, fmt.Errorf("ax: sqlite: set concurrency of name %q: %w", name, err)
	}
	return s.setNameInt(ctx, "set concurrency", "concurrency", name, n, by)
}

// setNameInt sets the integer column of the task name's row to n, writing the row
// only when the value changes and storing no row for 0 (the default a name never
// stored has), then reads the state. column is one of ax_names' limits, named by this
// package, never by a caller.
func (s *Store) setNameInt(ctx context.Context, op, column, name string, n int, by string) (*store.NameState, error) {
	st := &store.NameState{Name: name}
	err := s.write(ctx, op, func(tx *sql.Tx) error {
		ts := micros(now())
		var err error
		if n == 0 { // change a stored row, store none
			_, err = tx.ExecContext(ctx, `UPDATE ax_names SET `+column+` = 0, changed_by = ?, changed_at = ?
				WHERE namespace = ? AND name = ? AND `+column+` <> 0`, by, ts, s.ns, name)
		} else {
			_, err = tx.ExecContext(ctx, `INSERT INTO ax_names (namespace, name, `+column+`, changed_by, changed_at) VALUES (?, ?, ?, ?, ?)
				ON CONFLICT (namespace, name) DO UPDATE SET `+column+` = excluded.`+column+`,
					changed_by = excluded.changed_by, changed_at = excluded.changed_at
				WHERE `+column+` <> excluded.`+column, s.ns, name, n, by, ts)
		}
		if err != nil {
			return err
		}
		got, err := scanNameState(tx.QueryRowContext(ctx, nameSQL, s.ns, name))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil // never stored, and 0 stores nothing
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
// store.NameKeeper): it writes the row only when the limit (n, per) changes, and a
// name never stored is not stored for no limit. Removing the limit (n 0, stored with
// per 0) forgets the claim times recorded for it; changing it keeps them, and they
// count toward the new one. The claims that begin after the commit apply it: they
// read it, and the times, in their own write transaction.
func (s *Store) SetRate(ctx context.Context, name string, n int, per time.Duration, by string) (*store.NameState, error) {
	if err := driverkit.CheckRate(name, n, per, by); err != nil {
		return nil, fmt.Errorf("ax: sqlite: set rate of name %q: %w", name, err)
	}
	return s.setRate(ctx, "set rate", "rate", ", rate_starts = x''", name, n, per, by)
}

// SetKeyRate sets the task name's rate limit per task key in the view's namespace
// (see store.NameKeeper), as SetRate sets its rate: the row is written only when the
// limit changes, and a name never stored is not stored for no limit. The claim times
// recorded per key (ax_key_starts) are kept whatever the change, as the contract
// counts them toward any limit set later, until PruneKeyStarts finds that no window
// reaches them. The claims that begin after the commit apply it: they read it, and
// the times of their keys, in their own write transaction.
func (s *Store) SetKeyRate(ctx context.Context, name string, n int, per time.Duration, by string) (*store.NameState, error) {
	if err := driverkit.CheckRate(name, n, per, by); err != nil {
		return nil, fmt.Errorf("ax: sqlite: set key rate of name %q: %w", name, err)
	}
	return s.setRate(ctx, "set key rate", "key_rate", "", name, n, per, by)
}

// setRate sets the rate column of the task name's row and its period, column_per_us,
// to n per per (n 0: no limit, stored with per 0), writing the row only when either
// changes and storing no row for no limit; removing a stored limit also applies
// clear (", column = value", or empty). column and clear are named by this package,
// never by a caller.
func (s *Store) setRate(ctx context.Context, op, column, clear, name string, n int, per time.Duration, by string) (*store.NameState, error) {
	if n == 0 {
		per = 0
	}
	perColumn := column + "_per_us"
	st := &store.NameState{Name: name}
	err := s.write(ctx, op, func(tx *sql.Tx) error {
		ts := micros(now())
		var err error
		if n == 0 { // no limit: change a stored row, store none
			_, err = tx.ExecContext(ctx, `UPDATE ax_names SET `+column+` = 0, `+perColumn+` = 0`+clear+`, changed_by = ?, changed_at = ?
				WHERE namespace = ? AND name = ? AND (`+column+` <> 0 OR `+perColumn+` <> 0)`, by, ts, s.ns, name)
		} else {
			_, err = tx.ExecContext(ctx, `INSERT INTO ax_names (namespace, name, `+column+`, `+perColumn+`, changed_by, changed_at) VALUES (?, ?, ?, ?, ?, ?)
				ON CONFLICT (namespace, name) DO UPDATE SET `+column+` = excluded.`+column+`, `+perColumn+` = excluded.`+perColumn+`,
					changed_by = excluded.changed_by, changed_at = excluded.changed_at
				WHERE `+column+` <> excluded.`+column+` OR `+perColumn+` <> excluded.`+perColumn, s.ns, name, n, per.Microseconds(), by, ts)
		}
		if err != nil {
			return err
		}
		got, err := scanNameState(tx.QueryRowContext(ctx, nameSQL, s.ns, name))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil // never stored, and 0 stores nothing
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

// SetKeyConcurrency sets how many of the task name's tasks sharing a key may be in
// flight at once, in the view's namespace (see store.NameKeeper): n of 1 is stored as
// 0, the rule of one. It writes the row only when the value changes, and a name never
// stored is not stored for the rule of one. The claims that begin after the commit
// apply it: they read it in their own write transaction.
func (s *Store) SetKeyConcurrency(ctx context.Context, name string, n int, by string) (*store.NameState, error) {
	if err := driverkit.CheckConcurrency(name, n, by); err != nil {
		return nil, fmt.Errorf("ax: sqlite: set key concurrency of name %q: %w", name, err)
	}
	if n == 1 {
		n = 0 // the rule of one
	}
	return s.setNameInt(ctx, "set key concurrency", "key_concurrency", name, n, by)
}

// Names returns the state of every name of the view's namespace ever paused or
// limited, with the tasks in flight of each name with a concurrency limit.
func (s *Store) Names(ctx context.Context) ([]store.NameState, error) {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true}) // the names and their counts as of one moment
	if err != nil {
		return nil, s.wrap("list names", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT `+nameColumns+` FROM ax_names WHERE namespace = ? ORDER BY name`, s.ns)
	if err != nil {
		return nil, s.wrap("list names", err)
	}
	out, err := collect(rows, scanNameState)
	if err != nil {
		return nil, s.wrap("list names", err)
	}
	if out == nil {
		out = []store.NameState{}
	}
	for i := range out {
		if out[i].Concurrency == 0 {
			continue
		}
		// Counted as inflightStmt counts in a claim (on the writer's prepared
		// statements, which this read transaction cannot use).
		err := tx.QueryRowContext(ctx, `SELECT
				(SELECT count(*) FROM ax_tasks INDEXED BY ax_tasks_ns_dispatching_since WHERE namespace = ? AND status = 'DISPATCHING' AND name = ?)
				+ (SELECT count(*) FROM ax_tasks INDEXED BY ax_tasks_ns_running_heartbeat WHERE namespace = ? AND status = 'RUNNING' AND name = ?)`,
			s.ns, out[i].Name, s.ns, out[i].Name).Scan(&out[i].InFlight)
		if err != nil {
			return nil, s.wrap("list names", err)
		}
	}
	return out, nil
}

// pruneKeyStartsSQL deletes up to a limit of a namespace's claim times per task key
// whose last claim is at or before a time, oldest first, found on ax_key_starts_last.
const pruneKeyStartsSQL = `DELETE FROM ax_key_starts WHERE (namespace, name, task_key) IN (
	SELECT namespace, name, task_key FROM ax_key_starts WHERE namespace = ? AND last_at <= ? ORDER BY last_at LIMIT ?)`

// PruneKeyStarts deletes up to limit of the view's namespace's claim times per task
// key (ax_key_starts) whose last claim is store.MaxRatePer or more before now: no
// window of a rate per key reaches them (see store.Pruner).
func (s *Store) PruneKeyStarts(ctx context.Context, limit int) (int, error) {
	if limit < 1 || limit > store.MaxPrune {
		return 0, fmt.Errorf("ax: sqlite: prune key starts: limit %d is outside 1..%d: %w", limit, store.MaxPrune, store.ErrInvalid)
	}
	var n int64
	err := s.write(ctx, "prune key starts", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, pruneKeyStartsSQL, s.ns, micros(now().Add(-store.MaxRatePer)), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// scanNameState reads a row of nameColumns.
func scanNameState(row scanner) (*store.NameState, error) {
	var st store.NameState
	var at, perUS, keyPerUS int64
	if err := row.Scan(&st.Name, &st.Paused, &st.Concurrency, &st.Rate, &perUS, &st.KeyConcurrency, &st.KeyRate, &keyPerUS, &st.ChangedBy, &at); err != nil {
		return nil, err
	}
	st.Per, st.KeyPer, st.ChangedAt = time.Duration(perUS)*time.Microsecond, time.Duration(keyPerUS)*time.Microsecond, fromMicros(at)
	return &st, nil
}
