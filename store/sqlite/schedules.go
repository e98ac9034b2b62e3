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

// Schedules live in ax_schedules, one row per (namespace, name) (see
// migrations/0002_*.sql and 0004_*.sql); a view reads and writes its namespace's. Every
// write is one IMMEDIATE transaction on the writer connection, so FireSchedule's
// compare-and-set on next_fire_at and the occurrences it inserts commit together or
// not at all, and two FireSchedule calls from one reading cannot both apply.

const scheduleColumns = `name, spec, time_zone, overlap, misfire, payload, paused,
	next_fire_at, last_fire_at, created_at, updated_at, payload IS NOT NULL, ifnull(trace, '')`

func scanSchedule(row scanner) (*store.Schedule, error) {
	var (
		sc                     store.Schedule
		overlap, misfire       string
		payload                []byte
		next, created, updated int64
		last                   sql.NullInt64
		paused, hasPayload     bool
	)
	err := row.Scan(&sc.Name, &sc.Spec, &sc.TimeZone, &overlap, &misfire, &payload, &paused,
		&next, &last, &created, &updated, &hasPayload, &sc.Trace)
	if err != nil {
		return nil, err
	}
	if hasPayload { // the driver reads a zero-length BLOB as nil
		sc.Payload = append([]byte{}, payload...)
	}
	sc.Overlap, sc.Misfire, sc.Paused = store.OverlapPolicy(overlap), store.MisfirePolicy(misfire), paused
	sc.NextFireAt, sc.LastFireAt = fromMicros(next), fromNull(last)
	sc.CreatedAt, sc.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &sc, nil
}

// lookupSchedule reads one schedule of namespace ns in tx; an unknown name is nil, not
// an error.
func lookupSchedule(ctx context.Context, tx *sql.Tx, ns, name string) (*store.Schedule, error) {
	sc, err := scanSchedule(tx.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM ax_schedules WHERE namespace = ? AND name = ?`, ns, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return sc, err
}

// RegisterSchedules upserts schedule definitions in one transaction and returns the
// stored schedules in input order (see store.Store). A schedule whose spec and time
// zone are unchanged keeps its next_fire_at; every schedule keeps paused and
// last_fire_at.
func (s *Store) RegisterSchedules(ctx context.Context, defs []store.ScheduleDef) ([]store.Schedule, error) {
	if err := driverkit.CheckScheduleDefs(defs); err != nil {
		return nil, fmt.Errorf("ax: sqlite: register schedules: %w", err)
	}
	out := make([]store.Schedule, len(defs))
	err := s.write(ctx, "register schedules", func(tx *sql.Tx) error {
		// SET reads the row as it was, so next_fire_at compares the old spec.
		upsert, err := tx.PrepareContext(ctx, `INSERT INTO ax_schedules
			(namespace, name, spec, time_zone, overlap, misfire, payload, paused, next_fire_at, last_fire_at, created_at, updated_at, trace)
			VALUES (?, ?, ?, ?, ?, ?, CASE WHEN ? THEN X'' ELSE ? END, 0, ?, NULL, ?, ?, ?)
			ON CONFLICT (namespace, name) DO UPDATE SET
				next_fire_at = CASE WHEN spec = excluded.spec AND time_zone = excluded.time_zone
					THEN next_fire_at ELSE excluded.next_fire_at END,
				spec = excluded.spec, time_zone = excluded.time_zone,
				overlap = excluded.overlap, misfire = excluded.misfire, payload = excluded.payload,
				trace = excluded.trace, updated_at = excluded.updated_at
			RETURNING `+scheduleColumns)
		if err != nil {
			return err
		}
		defer upsert.Close()
		ts := micros(now())
		for i, d := range defs {
			sc, err := scanSchedule(upsert.QueryRowContext(ctx, s.ns, d.Name, d.Spec, d.TimeZone, string(d.Overlap), string(d.Misfire),
				d.Payload != nil && len(d.Payload) == 0, d.Payload, micros(d.NextFireAt), ts, ts, traceArg(d.Trace)))
			if err != nil {
				return err
			}
			out[i] = *sc
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Schedules returns every schedule of the view's namespace, by name.
func (s *Store) Schedules(ctx context.Context) ([]store.Schedule, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+scheduleColumns+` FROM ax_schedules WHERE namespace = ? ORDER BY name`, s.ns)
	if err != nil {
		return nil, s.wrap("list schedules", err)
	}
	out, err := collect(rows, scanSchedule)
	return out, s.wrap("list schedules", err)
}

// PauseSchedule marks a schedule paused and cancels its SCHEDULED occurrences (tasks
// whose name and task key are the schedule's name) in one transaction. Pausing a
// paused schedule changes nothing. It returns store.ErrNotFound for an unknown name.
func (s *Store) PauseSchedule(ctx context.Context, name string) (*store.Schedule, error) {
	var sc *store.Schedule
	err := s.write(ctx, "pause schedule", func(tx *sql.Tx) error {
		var err error
		sc, err = s.pauseIn(ctx, tx, name)
		return err
	})
	if err != nil {
		return nil, err
	}
	if sc == nil {
		return nil, fmt.Errorf("ax: sqlite: pause schedule %q: %w", name, store.ErrNotFound)
	}
	return sc, nil
}

// pauseIn is PauseSchedule in tx: the schedule, nil when there is none.
func (s *Store) pauseIn(ctx context.Context, tx *sql.Tx, name string) (*store.Schedule, error) {
	ts := micros(now())
	sc, err := scanSchedule(tx.QueryRowContext(ctx, `UPDATE ax_schedules SET paused = 1, updated_at = ?
		WHERE namespace = ? AND name = ? AND paused = 0 RETURNING `+scheduleColumns, ts, s.ns, name))
	if errors.Is(err, sql.ErrNoRows) { // paused already, or unknown
		return lookupSchedule(ctx, tx, s.ns, name)
	}
	if err != nil {
		return nil, err
	}
	_, err = cancelOccurrences(ctx, tx, s.ns, name, ts)
	return sc, err
}

// cancelOccurrencesSQL cancels a schedule's SCHEDULED occurrences: a range of
// ax_tasks_ns_name_key.
const cancelOccurrencesSQL = `UPDATE ax_tasks SET status = 'CANCELLED', finished_at = ?, updated_at = ?
	WHERE namespace = ? AND name = ? AND task_key = ? AND status = 'SCHEDULED'`

// cancelOccurrences cancels, at ts, the SCHEDULED tasks of namespace ns whose name and
// task key are name, and returns how many.
func cancelOccurrences(ctx context.Context, tx *sql.Tx, ns, name string, ts int64) (int64, error) {
	res, err := tx.ExecContext(ctx, cancelOccurrencesSQL, ts, ts, ns, name, name)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// DeleteSchedule deletes a schedule's row and cancels its SCHEDULED occurrences in
// one transaction, and returns how many it cancelled (see store.Store). An unknown
// name is store.ErrNotFound, an empty one store.ErrInvalid.
func (s *Store) DeleteSchedule(ctx context.Context, name string) (int, error) {
	if name == "" {
		return 0, fmt.Errorf("ax: sqlite: delete schedule: empty name: %w", store.ErrInvalid)
	}
	var found bool
	var cancelled int64
	err := s.write(ctx, "delete schedule", func(tx *sql.Tx) error {
		var err error
		found, err = applied(tx.ExecContext(ctx, `DELETE FROM ax_schedules WHERE namespace = ? AND name = ?`, s.ns, name))
		if err != nil || !found {
			return err
		}
		cancelled, err = cancelOccurrences(ctx, tx, s.ns, name, micros(now()))
		return err
	})
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("ax: sqlite: delete schedule %q: %w", name, store.ErrNotFound)
	}
	return int(cancelled), nil
}

// ResumeSchedule clears a paused schedule's flag and sets its next fire time to next;
// a schedule that is not paused is left alone. It returns the schedule, or
// store.ErrNotFound; a zero next is store.ErrInvalid.
func (s *Store) ResumeSchedule(ctx context.Context, name string, next time.Time) (*store.Schedule, error) {
	if next.IsZero() {
		return nil, fmt.Errorf("ax: sqlite: resume schedule %q: zero next fire time: %w", name, store.ErrInvalid)
	}
	var sc *store.Schedule
	err := s.write(ctx, "resume schedule", func(tx *sql.Tx) error {
		var err error
		sc, err = s.resumeIn(ctx, tx, name, next)
		return err
	})
	if err != nil {
		return nil, err
	}
	if sc == nil {
		return nil, fmt.Errorf("ax: sqlite: resume schedule %q: %w", name, store.ErrNotFound)
	}
	return sc, nil
}

// resumeIn is ResumeSchedule in tx: the schedule, nil when there is none.
func (s *Store) resumeIn(ctx context.Context, tx *sql.Tx, name string, next time.Time) (*store.Schedule, error) {
	// The gap first, while the row still holds the next fire time it passes over.
	if _, err := tx.ExecContext(ctx, `INSERT INTO ax_slot_gaps (namespace, schedule, from_at, until_at, why, result, created_at)
		SELECT namespace, name, next_fire_at, ?, ?, ?, ? FROM ax_schedules
		WHERE namespace = ? AND name = ? AND paused = 1 AND next_fire_at < ?`,
		micros(next), store.GapPaused, store.PausedResult, micros(now()), s.ns, name, micros(next)); err != nil {
		return nil, err
	}
	sc, err := scanSchedule(tx.QueryRowContext(ctx, `UPDATE ax_schedules SET paused = 0, next_fire_at = ?, updated_at = ?
		WHERE namespace = ? AND name = ? AND paused = 1 RETURNING `+scheduleColumns, micros(next), micros(now()), s.ns, name))
	if errors.Is(err, sql.ErrNoRows) { // not paused, or unknown
		return lookupSchedule(ctx, tx, s.ns, name)
	}
	return sc, err
}

// FireSchedule advances a schedule from p.Expect to p.Next and inserts its occurrences,
// in one transaction, if the schedule exists, is not paused and its next fire time is
// p.Expect; otherwise it writes nothing and Applied is false. The occurrences go
// through Insert's own path: refill sequence numbers, and store.ErrDuplicate in their
// result for an occurrence stored already. It writes nothing, and fails with
// store.ErrFenced, unless p.Fence admits it (see fence.go).
func (s *Store) FireSchedule(ctx context.Context, p store.FireParams) (*store.FireResult, error) {
	if err := driverkit.CheckFire(p); err != nil {
		return nil, fmt.Errorf("ax: sqlite: %w", err)
	}
	if err := driverkit.CheckFence(p.Fence); err != nil {
		return nil, fmt.Errorf("ax: sqlite: fire schedule %q: %w", p.Name, err)
	}
	if err := validNew(fmt.Sprintf("fire schedule %q", p.Name), p.Tasks); err != nil {
		return nil, err
	}
	res := &store.FireResult{}
	err := s.write(ctx, "fire schedule", func(tx *sql.Tx) error {
		if err := checkFence(ctx, tx, p.Fence); err != nil {
			return err
		}
		var last any // NULL keeps last_fire_at
		if !p.Last.IsZero() {
			last = micros(p.Last)
		}
		ok, err := applied(tx.ExecContext(ctx, `UPDATE ax_schedules SET next_fire_at = ?,
			last_fire_at = COALESCE(?, last_fire_at), updated_at = ?
			WHERE namespace = ? AND name = ? AND next_fire_at = ? AND paused = 0
			AND (? = '' OR (spec = ? AND time_zone = ?))`, micros(p.Next), last, micros(now()), s.ns, p.Name, micros(p.Expect), p.Spec, p.Spec, p.TimeZone))
		if err != nil || !ok {
			return err
		}
		if err := s.insertGaps(ctx, tx, p.Name, p.Gaps); err != nil {
			return err
		}
		res.Applied, res.Inserted = true, make([]store.Inserted, len(p.Tasks))
		return s.insert(ctx, tx, s.batch, p.Tasks, res.Inserted)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
