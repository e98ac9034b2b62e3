package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// Column limits of ax_schedules, checked before writing. A schedule's name is also
// its handler's name and its occurrences' task key, so it has the name's limit.
const (
	maxSpec     = 500 // bytes
	maxTimeZone = 100 // bytes
)

const scheduleColumns = `name, spec, time_zone, overlap, misfire, payload, payload IS NOT NULL, paused,
	next_fire_at, last_fire_at, created_at, updated_at, trace`

func scanSchedule(row scanner) (*store.Schedule, error) {
	var (
		sc         store.Schedule
		payload    []byte
		hasPayload bool
	)
	if err := row.Scan(&sc.Name, &sc.Spec, &sc.TimeZone, (*string)(&sc.Overlap), (*string)(&sc.Misfire), &payload, &hasPayload, &sc.Paused,
		dbTime{&sc.NextFireAt}, dbTime{&sc.LastFireAt}, dbTime{&sc.CreatedAt}, dbTime{&sc.UpdatedAt}, nullText{&sc.Trace}); err != nil {
		return nil, err
	}
	if hasPayload {
		sc.Payload = append([]byte{}, payload...)
	}
	return &sc, nil
}

// RegisterSchedules upserts schedule definitions of the view's namespace in one
// transaction and returns the stored schedules in input order (see store.Store). The
// rows are locked by (namespace, name),
// ascending; new ones are written by one plain multi-row INSERT (a concurrent
// registration of the same new name makes it retry), existing ones by one UPDATE
// each that keeps paused and last_fire_at, and next_fire_at unless the spec or time
// zone changed.
func (s *Store) RegisterSchedules(ctx context.Context, defs []store.ScheduleDef) ([]store.Schedule, error) {
	if err := s.check("register schedules"); err != nil {
		return nil, err
	}
	if err := driverkit.CheckScheduleDefs(defs); err != nil {
		return nil, fmt.Errorf("ax: mysql: register schedules: %w", err)
	}
	for _, d := range defs {
		switch {
		case !validText(d.Name, maxName) || !validText(d.Spec, maxSpec) || !validText(d.TimeZone, maxTimeZone):
			return nil, fmt.Errorf("ax: mysql: register schedules: schedule %q: name (≤ %d bytes), spec (≤ %d) or time zone (≤ %d) too long or not UTF-8: %w",
				d.Name, maxName, maxSpec, maxTimeZone, store.ErrInvalid)
		case !inRange(d.NextFireAt):
			return nil, fmt.Errorf("ax: mysql: register schedules: schedule %q: next fire time %v outside years 1000-9999: %w",
				d.Name, d.NextFireAt, store.ErrInvalid)
		}
	}
	if len(defs) == 0 {
		return []store.Schedule{}, nil
	}
	sorted := slices.Clone(defs)
	slices.SortFunc(sorted, func(a, b store.ScheduleDef) int { return cmp.Compare(a.Name, b.Name) })
	names := make([]any, 0, 1+len(sorted)) // the namespace, then the names
	names = append(names, s.ns)
	for _, d := range sorted {
		names = append(names, d.Name)
	}
	var out []store.Schedule
	err := s.run(ctx, "register schedules", 0, func(tx *sql.Tx, _ int64) error {
		// Lock the existing rows, in name order, and learn their timing.
		type timing struct{ spec, zone string }
		have := make(map[string]timing, len(sorted))
		rows, err := tx.QueryContext(ctx, `SELECT name, spec, time_zone FROM ax_schedules WHERE namespace = ? AND name IN (`+marks(len(sorted))+`)
			ORDER BY name FOR UPDATE`, names...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var name string
			var tm timing
			if err := rows.Scan(&name, &tm.spec, &tm.zone); err != nil {
				rows.Close()
				return err
			}
			have[name] = tm
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		var values string
		var args []any
		for _, d := range sorted {
			tm, ok := have[d.Name]
			if !ok {
				if values != "" {
					values += ","
				}
				values += "(?,?,?,?,?,?,?,FALSE,?,NULL,UTC_TIMESTAMP(6),UTC_TIMESTAMP(6),?)"
				args = append(args, s.ns, d.Name, d.Spec, d.TimeZone, string(d.Overlap), string(d.Misfire), nullPayload(d.Payload), dt(d.NextFireAt),
					nullString(d.Trace))
				continue
			}
			q := `UPDATE ax_schedules SET overlap = ?, misfire = ?, payload = ?, trace = ?, updated_at = UTC_TIMESTAMP(6)`
			uargs := []any{string(d.Overlap), string(d.Misfire), nullPayload(d.Payload), nullString(d.Trace)}
			if tm.spec != d.Spec || tm.zone != d.TimeZone {
				q += `, spec = ?, time_zone = ?, next_fire_at = ?`
				uargs = append(uargs, d.Spec, d.TimeZone, dt(d.NextFireAt))
			}
			if _, err := tx.ExecContext(ctx, q+` WHERE namespace = ? AND name = ?`, append(uargs, s.ns, d.Name)...); err != nil {
				return err
			}
		}
		if values != "" {
			_, err := tx.ExecContext(ctx, `INSERT INTO ax_schedules (namespace, name, spec, time_zone, overlap, misfire, payload, paused,
				next_fire_at, last_fire_at, created_at, updated_at, trace) VALUES `+values, args...)
			var me *mysql.MySQLError
			if errors.As(err, &me) && me.Number == 1062 {
				return errRetry // registered by another process meanwhile: update it instead
			}
			if err != nil {
				return err
			}
		}
		stored, err := selectSchedules(ctx, tx, `WHERE namespace = ? AND name IN (`+marks(len(sorted))+`)`, names...)
		if err != nil {
			return err
		}
		out, err = driverkit.SchedulesInOrder(defs, stored)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// selectSchedules reads the schedules a WHERE clause (or "") selects, by name.
func selectSchedules(ctx context.Context, q querier, where string, args ...any) ([]store.Schedule, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+scheduleColumns+` FROM ax_schedules `+where+` ORDER BY name`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []store.Schedule{}
	for rows.Next() {
		sc, err := scanSchedule(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *sc)
	}
	return out, rows.Err()
}

// Schedules returns every stored schedule of the view's namespace, by name.
func (s *Store) Schedules(ctx context.Context) ([]store.Schedule, error) {
	if err := s.check("list schedules"); err != nil {
		return nil, err
	}
	out, err := selectSchedules(ctx, s.db, "WHERE namespace = ?", s.ns)
	if err != nil {
		return nil, s.wrap("list schedules", err)
	}
	return out, nil
}

// getSchedule reads one schedule of namespace ns inside tx; nil when there is none.
func getSchedule(ctx context.Context, tx *sql.Tx, ns, name string) (*store.Schedule, error) {
	sc, err := scanSchedule(tx.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM ax_schedules WHERE namespace = ? AND name = ?`, ns, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return sc, err
}

// PauseSchedule marks a schedule of the view's namespace paused and cancels its
// SCHEDULED occurrences (tasks of the namespace whose name and task key are the
// schedule's name) in one transaction. The schedule's
// row is locked first, so a concurrent FireSchedule either commits its occurrences
// before the pause reads them or finds the schedule paused. The occurrences are found
// by a plain read of the (namespace, name, key) index and cancelled by id, ascending, at most
// store.MaxBatch per statement, each with the CAS status = 'SCHEDULED'. Pausing a
// paused schedule changes nothing.
func (s *Store) PauseSchedule(ctx context.Context, name string) (*store.Schedule, error) {
	var sc *store.Schedule
	err := s.run(ctx, "pause schedule", 0, func(tx *sql.Tx, _ int64) error {
		var err error
		sc, err = s.pauseIn(ctx, tx, name)
		return err
	})
	if err != nil {
		return nil, err
	}
	if sc == nil {
		return nil, fmt.Errorf("ax: mysql: pause schedule %q: %w", name, store.ErrNotFound)
	}
	return sc, nil
}

// pauseIn is PauseSchedule in tx: the schedule, nil when there is none.
func (s *Store) pauseIn(ctx context.Context, tx *sql.Tx, name string) (*store.Schedule, error) {
	res, err := tx.ExecContext(ctx, `UPDATE ax_schedules SET paused = TRUE, updated_at = UTC_TIMESTAMP(6)
		WHERE namespace = ? AND name = ? AND NOT paused`, s.ns, name)
	if err != nil {
		return nil, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, err
	}
	if n == 1 {
		if _, err := cancelOccurrences(ctx, tx, s.ns, name); err != nil {
			return nil, err
		}
	}
	return getSchedule(ctx, tx, s.ns, name)
}

// cancelOccurrences cancels the SCHEDULED tasks of namespace ns whose name and task
// key are name and returns how many.
func cancelOccurrences(ctx context.Context, tx *sql.Tx, ns, name string) (int64, error) {
	rows, err := tx.QueryContext(ctx, "SELECT id FROM ax_tasks WHERE namespace = ? AND name = ? AND task_key = ? AND status = 'SCHEDULED' ORDER BY id",
		ns, name, name)
	if err != nil {
		return 0, err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	var cancelled int64
	err = chunks(len(ids), func(lo, hi int) error {
		part := ids[lo:hi]
		args := append(int64s(part), ns, name, name)
		res, err := tx.ExecContext(ctx, `UPDATE ax_tasks FORCE INDEX (PRIMARY) SET status = 'CANCELLED',
			finished_at = UTC_TIMESTAMP(6), updated_at = UTC_TIMESTAMP(6)
			WHERE id IN (`+marks(len(part))+`) AND namespace = ? AND name = ? AND task_key = ? AND status = 'SCHEDULED'`, args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		cancelled += n
		return err
	})
	return cancelled, err
}

// DeleteSchedule deletes the row of a schedule of the view's namespace and cancels its
// SCHEDULED occurrences in one transaction, and returns how many it cancelled (see store.Store). The DELETE locks
// the schedule's row first, as PauseSchedule's UPDATE does, so a concurrent
// FireSchedule either commits its occurrences before the occurrences are read (and
// they are cancelled) or finds no row. An unknown name is store.ErrNotFound, an empty
// one store.ErrInvalid.
func (s *Store) DeleteSchedule(ctx context.Context, name string) (int, error) {
	if name == "" {
		return 0, fmt.Errorf("ax: mysql: delete schedule: empty name: %w", store.ErrInvalid)
	}
	var found bool
	var cancelled int64
	err := s.run(ctx, "delete schedule", 0, func(tx *sql.Tx, _ int64) error {
		found, cancelled = false, 0
		res, err := tx.ExecContext(ctx, `DELETE FROM ax_schedules WHERE namespace = ? AND name = ?`, s.ns, name)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil || n == 0 {
			return err
		}
		found = true
		cancelled, err = cancelOccurrences(ctx, tx, s.ns, name)
		return err
	})
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("ax: mysql: delete schedule %q: %w", name, store.ErrNotFound)
	}
	return int(cancelled), nil
}

// ResumeSchedule clears the flag of a paused schedule of the view's namespace and sets its next fire time to next;
// a schedule that is not paused is left alone. A zero next (or one outside years
// 1000-9999) is store.ErrInvalid.
func (s *Store) ResumeSchedule(ctx context.Context, name string, next time.Time) (*store.Schedule, error) {
	if err := s.check("resume schedule"); err != nil {
		return nil, err
	}
	if next.IsZero() || !inRange(next) {
		return nil, fmt.Errorf("ax: mysql: resume schedule %q: next fire time %v zero or outside years 1000-9999: %w", name, next, store.ErrInvalid)
	}
	var sc *store.Schedule
	err := s.run(ctx, "resume schedule", 0, func(tx *sql.Tx, _ int64) error {
		var err error
		sc, err = s.resumeIn(ctx, tx, name, next)
		return err
	})
	if err != nil {
		return nil, err
	}
	if sc == nil {
		return nil, fmt.Errorf("ax: mysql: resume schedule %q: %w", name, store.ErrNotFound)
	}
	return sc, nil
}

// resumeIn is ResumeSchedule in tx: the schedule, nil when there is none.
func (s *Store) resumeIn(ctx context.Context, tx *sql.Tx, name string, next time.Time) (*store.Schedule, error) {
	// Lock the paused row and read the next fire time the resume passes over: a
	// concurrent resume waits here, then finds the schedule not paused.
	var from time.Time
	err := tx.QueryRowContext(ctx, `SELECT next_fire_at FROM ax_schedules WHERE namespace = ? AND name = ? AND paused FOR UPDATE`,
		s.ns, name).Scan(dbTime{&from})
	switch {
	case errors.Is(err, sql.ErrNoRows): // not paused, or unknown
		return getSchedule(ctx, tx, s.ns, name)
	case err != nil:
		return nil, err
	}
	if from.Before(next) {
		if err := s.insertGaps(ctx, tx, name, []store.SlotGap{{From: from, Until: next, Why: store.GapPaused, Result: store.PausedResult}}); err != nil {
			return nil, err
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE ax_schedules SET paused = FALSE, next_fire_at = ?, updated_at = UTC_TIMESTAMP(6)
		WHERE namespace = ? AND name = ? AND paused`, dt(next), s.ns, name); err != nil {
		return nil, err
	}
	return getSchedule(ctx, tx, s.ns, name)
}

// FireSchedule advances a schedule of the view's namespace and inserts its occurrences,
// in that namespace, in one transaction (see store.Store). The compare-and-set is one
// UPDATE … WHERE namespace = ? AND name = ? AND next_fire_at = Expect AND NOT paused: concurrent calls with the same Expect queue on
// the schedule's row, and each one after the first finds next_fire_at moved and
// applies nothing. The occurrences go through Insert's path — its sequence numbers,
// its duplicate handling — inside the same transaction.
func (s *Store) FireSchedule(ctx context.Context, p store.FireParams) (*store.FireResult, error) {
	op := fmt.Sprintf("fire schedule %q", p.Name)
	if err := s.check(op); err != nil {
		return nil, err
	}
	if err := driverkit.CheckFire(p); err != nil {
		return nil, fmt.Errorf("ax: mysql: %w", err)
	}
	if err := driverkit.CheckFence(p.Fence); err != nil {
		return nil, fmt.Errorf("ax: mysql: %s: %w", op, err)
	}
	if !inRange(p.Expect) || !inRange(p.Next) || (!p.Last.IsZero() && !inRange(p.Last)) {
		return nil, fmt.Errorf("ax: mysql: %s: fire times outside years 1000-9999: %w", op, store.ErrInvalid)
	}
	if err := validateNew(op, p.Tasks); err != nil {
		return nil, err
	}
	var last any // NULL keeps last_fire_at
	if !p.Last.IsZero() {
		last = dt(p.Last)
	}
	res := &store.FireResult{}
	err := s.run(ctx, op, len(p.Tasks), func(tx *sql.Tx, seq int64) error {
		*res = store.FireResult{}
		if err := s.checkFence(ctx, tx, p.Fence); err != nil {
			return err
		}
		r, err := tx.ExecContext(ctx, `UPDATE ax_schedules SET next_fire_at = ?, last_fire_at = COALESCE(?, last_fire_at),
			updated_at = UTC_TIMESTAMP(6) WHERE namespace = ? AND name = ? AND next_fire_at = ? AND NOT paused
			AND (? = '' OR (spec = ? AND time_zone = ?))`, dt(p.Next), last, s.ns, p.Name, dt(p.Expect), p.Spec, p.Spec, p.TimeZone)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		if err != nil || n == 0 {
			return err
		}
		res.Applied = true
		if err := s.insertGaps(ctx, tx, p.Name, p.Gaps); err != nil {
			return err
		}
		if len(p.Tasks) == 0 {
			return nil
		}
		res.Inserted, err = insert(ctx, tx, s.ns, p.Tasks, seq, s.returning)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
