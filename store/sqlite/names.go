package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
)

// Names live in ax_names, one row per (namespace, name) ever paused (see
// store.NameKeeper); the claim statements leave a paused name's tasks alone
// (pausedName).

// pausedName is true, in a statement over ax_tasks, when the row's name is paused in
// its namespace: one probe of ax_names' primary key per row, made only when some name
// is paused — the first EXISTS does not depend on the row, and SQLite evaluates it
// once per statement.
const pausedName = `(EXISTS (SELECT 1 FROM ax_names WHERE paused)
	AND EXISTS (SELECT 1 FROM ax_names p WHERE p.namespace = ax_tasks.namespace AND p.name = ax_tasks.name AND p.paused))`

const nameSQL = `SELECT name, paused, changed_by, changed_at FROM ax_names WHERE namespace = ? AND name = ?`

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

// Names returns the state of every name of the view's namespace ever paused.
func (s *Store) Names(ctx context.Context) ([]store.NameState, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT name, paused, changed_by, changed_at FROM ax_names WHERE namespace = ? ORDER BY name`, s.ns)
	if err != nil {
		return nil, s.wrap("list names", err)
	}
	out, err := collect(rows, scanNameState)
	if out == nil {
		out = []store.NameState{}
	}
	return out, s.wrap("list names", err)
}

func scanNameState(row scanner) (*store.NameState, error) {
	var st store.NameState
	var at int64
	if err := row.Scan(&st.Name, &st.Paused, &st.ChangedBy, &at); err != nil {
		return nil, err
	}
	st.ChangedAt = fromMicros(at)
	return &st, nil
}
