package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
)

// Names live in ax_names, one row per (namespace, name) ever paused (see
// store.NameKeeper); the claim statements leave a paused name's tasks alone
// (pausedName).

// pausedName is true, in a statement over ax_tasks t of namespace $3, when t's name
// is paused. The first EXISTS does not depend on the row: PostgreSQL evaluates it once
// per statement, so that a namespace with no paused name costs one index probe per
// statement, not one per row.
const pausedName = `(EXISTS (SELECT 1 FROM ax_names p WHERE p.namespace = $3 AND p.paused)
		AND EXISTS (SELECT 1 FROM ax_names p WHERE p.namespace = $3 AND p.name = t.name AND p.paused))`

const (
	// pauseNameSQL pauses name $2 of namespace $1 for $3, unless it is paused.
	pauseNameSQL = `INSERT INTO ax_names AS n (namespace, name, paused, changed_by, changed_at)
		VALUES ($1, $2, true, $3, clock_timestamp())
		ON CONFLICT (namespace, name) DO UPDATE SET paused = true, changed_by = $3, changed_at = clock_timestamp()
			WHERE NOT n.paused`
	// resumeNameSQL resumes name $2 of namespace $1 for $3, if it is paused, and
	// returns the name when it did.
	resumeNameSQL = `UPDATE ax_names SET paused = false, changed_by = $3, changed_at = clock_timestamp()
		WHERE namespace = $1 AND name = $2 AND paused RETURNING name`
	// nameSQL reads the state of name $2 of namespace $1.
	nameSQL = `SELECT name, paused, changed_by, changed_at FROM ax_names WHERE namespace = $1 AND name = $2`
)

// PauseName pauses the task name in the view's namespace (see store.NameKeeper).
func (s *Store) PauseName(ctx context.Context, name, by string) (*store.NameState, error) {
	if err := driverkit.CheckNameState(name, by); err != nil {
		return nil, fmt.Errorf("ax: postgres: pause name %q: %w", name, err)
	}
	var st *store.NameState
	err := s.tx(ctx, "pause name", func(b *pgx.Batch) {
		b.Queue(pauseNameSQL, s.ns, name, by)
		b.Queue(nameSQL, s.ns, name)
	}, func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return err
		}
		var err error
		st, err = scanNameState(br.QueryRow())
		return err
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// ResumeName resumes the task name in the view's namespace and restamps its
// SCHEDULED tasks for the refill, in one transaction published as Insert's are (see
// store.NameKeeper).
func (s *Store) ResumeName(ctx context.Context, name, by string) (*store.NameState, error) {
	if err := driverkit.CheckNameState(name, by); err != nil {
		return nil, fmt.Errorf("ax: postgres: resume name %q: %w", name, err)
	}
	st := &store.NameState{Name: name}
	err := s.tx(ctx, "resume name", func(b *pgx.Batch) {
		b.Queue(publishSQL, s.lockKey, s.channel)
		b.Queue(`WITH r AS (`+resumeNameSQL+`) `+restampWhenSQL, s.ns, name, by)
		b.Queue(nameSQL, s.ns, name)
	}, func(br pgx.BatchResults) error {
		for range 2 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		got, err := scanNameState(br.QueryRow())
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // never paused
		}
		if err == nil {
			st = got
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// restampWhenSQL gives the SCHEDULED tasks of name $2 of namespace $1 fresh sequence
// numbers, so that the refill's cursor finds them again — only when the resume (the
// CTE r) applied.
const restampWhenSQL = `UPDATE ax_tasks SET seq = nextval('ax_seq')
	WHERE namespace = $1 AND name = $2 AND status = 'SCHEDULED' AND EXISTS (SELECT 1 FROM r)`

// Names returns the state of every name of the view's namespace ever paused.
func (s *Store) Names(ctx context.Context) ([]store.NameState, error) {
	if err := s.check("list names"); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT name, paused, changed_by, changed_at FROM ax_names WHERE namespace = $1 ORDER BY name`, s.ns)
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
	if err := rows.Err(); err != nil {
		return nil, s.wrap("list names", err)
	}
	return out, nil
}

func scanNameState(row scanner) (*store.NameState, error) {
	var st store.NameState
	var at time.Time
	if err := row.Scan(&st.Name, &st.Paused, &st.ChangedBy, &at); err != nil {
		return nil, err
	}
	st.ChangedAt = at.UTC()
	return &st, nil
}
