package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
)

// Names live in ax_names, one row per (namespace, name) ever paused or limited (see
// store.NameKeeper); the claim leaves a paused name's tasks alone (pausedName, read
// with the lock of the rows it claims).

// pausedName is true, in a statement over ax_tasks, when the row's name is paused in
// its namespace: one probe of ax_names' primary key per row, made only when some name
// is paused — the first EXISTS does not depend on the row, and MySQL evaluates it once
// per statement.
const pausedName = `(EXISTS (SELECT 1 FROM ax_names WHERE paused)
	AND EXISTS (SELECT 1 FROM ax_names p WHERE p.namespace = ax_tasks.namespace AND p.name = ax_tasks.name AND p.paused))`

const nameSQL = `SELECT name, paused, concurrency, changed_by, changed_at FROM ax_names WHERE namespace = ? AND name = ?`

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
	st := &store.NameState{Name: name}
	err := s.run(ctx, "set concurrency", 0, func(tx *sql.Tx, _ int64) error {
		var err error
		if n == 0 { // no row to create
			_, err = tx.ExecContext(ctx, `UPDATE ax_names SET concurrency = 0, changed_by = ?, changed_at = UTC_TIMESTAMP(6)
				WHERE namespace = ? AND name = ? AND concurrency <> 0`, by, s.ns, name)
		} else {
			// MySQL assigns left to right: changed_by and changed_at read the old limit
			// before it is set.
			_, err = tx.ExecContext(ctx, `INSERT INTO ax_names (namespace, name, concurrency, changed_by, changed_at)
				VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6))
				ON DUPLICATE KEY UPDATE changed_by = IF(concurrency = VALUES(concurrency), changed_by, VALUES(changed_by)),
					changed_at = IF(concurrency = VALUES(concurrency), changed_at, VALUES(changed_at)),
					concurrency = VALUES(concurrency)`, s.ns, name, n, by)
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

// Names returns the state of every name of the view's namespace ever paused or
// limited.
func (s *Store) Names(ctx context.Context) ([]store.NameState, error) {
	if err := s.check("list names"); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT name, paused, concurrency, changed_by, changed_at FROM ax_names WHERE namespace = ? ORDER BY name`, s.ns)
	if err != nil {
		return nil, s.wrap("list names", err)
	}
	defer rows.Close()
	out := []store.NameState{}
	for rows.Next() {
		st, err := scanNameState(rows)
		if err != nil {
			return nil, s.wrap("list names", err)
		}
		out = append(out, *st)
	}
	return out, s.wrap("list names", rows.Err())
}

// scanNameState reads a name's state as nameSQL selects it.
func scanNameState(row scanner) (*store.NameState, error) {
	var st store.NameState
	if err := row.Scan(&st.Name, &st.Paused, &st.Concurrency, &st.ChangedBy, dbTime{&st.ChangedAt}); err != nil {
		return nil, err
	}
	return &st, nil
}
