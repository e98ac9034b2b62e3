package postgres

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// Schedules live in ax_schedules, one row per (namespace, name) (see DESIGN.md,
// "Schedules"); every statement names the view's namespace.
// Every change is one conditional write; FireSchedule's compare-and-set on
// next_fire_at and the occurrences it inserts commit together.

// scheduleCols lists the columns scanSchedule reads, for a table aliased s.
const scheduleCols = `s.name, s.spec, s.time_zone, s.overlap, s.misfire, s.payload, s.payload IS NOT NULL, s.paused,
	s.next_fire_at, s.last_fire_at, s.created_at, s.updated_at, COALESCE(s.trace, '')`

func scanSchedule(row scanner) (*store.Schedule, error) {
	var (
		sc                 store.Schedule
		overlap, misfire   string
		payload            []byte
		hasPayload         bool
		next, created, upd time.Time
		last               sql.NullTime
	)
	if err := row.Scan(&sc.Name, &sc.Spec, &sc.TimeZone, &overlap, &misfire, &payload, &hasPayload, &sc.Paused,
		&next, &last, &created, &upd, &sc.Trace); err != nil {
		return nil, err
	}
	sc.Overlap, sc.Misfire = store.OverlapPolicy(overlap), store.MisfirePolicy(misfire)
	if hasPayload {
		sc.Payload = append([]byte{}, payload...)
	}
	sc.NextFireAt, sc.LastFireAt = next.UTC(), fromNull(last)
	sc.CreatedAt, sc.UpdatedAt = created.UTC(), upd.UTC()
	return &sc, nil
}

// readSchedules reads the scheduleCols rows of one statement.
func readSchedules(rows pgx.Rows) ([]store.Schedule, error) {
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

// registerSQL upserts one chunk of definitions into namespace $8 (their traces are
// $9, NULL for none), sorted by name so
// that concurrent registrations lock the rows in one order. Every SET expression
// reads the row as it was: a changed spec or time zone takes the given next_fire_at,
// otherwise the stored one stays; paused, last_fire_at and created_at are never
// touched.
const registerSQL = `WITH ts AS (SELECT clock_timestamp() AS now),
c AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::timestamptz[], $9::text[])
	WITH ORDINALITY AS c(name, spec, time_zone, overlap, misfire, payload, next_fire_at, trace, ord))
INSERT INTO ax_schedules AS s (namespace, name, spec, time_zone, overlap, misfire, payload, paused, next_fire_at, created_at, updated_at, trace)
SELECT $8, c.name, c.spec, c.time_zone, c.overlap, c.misfire, c.payload, false, c.next_fire_at, ts.now, ts.now, NULLIF(c.trace, '')
FROM c, ts ORDER BY c.ord
ON CONFLICT (namespace, name) DO UPDATE SET
	spec = excluded.spec, time_zone = excluded.time_zone,
	next_fire_at = CASE WHEN s.spec = excluded.spec AND s.time_zone = excluded.time_zone
		THEN s.next_fire_at ELSE excluded.next_fire_at END,
	overlap = excluded.overlap, misfire = excluded.misfire, payload = excluded.payload,
	trace = excluded.trace, updated_at = excluded.updated_at
RETURNING ` + scheduleCols

// checkScheduleName rejects a schedule name that could not be the task key of its
// occurrences.
func checkScheduleName(name string) error {
	if err := checkTaskKey(name); err != nil {
		return fmt.Errorf("schedule %q: name: %w", name, err)
	}
	return nil
}

// RegisterSchedules upserts schedule definitions in one transaction and returns the
// stored schedules in input order (see store.Store). A name is at most 500 bytes of
// UTF-8: it is the task key of the schedule's occurrences.
func (s *Store) RegisterSchedules(ctx context.Context, defs []store.ScheduleDef) ([]store.Schedule, error) {
	if err := driverkit.CheckScheduleDefs(defs); err != nil {
		return nil, fmt.Errorf("ax: postgres: register schedules: %w", err)
	}
	for _, d := range defs {
		if err := checkScheduleName(d.Name); err != nil {
			return nil, fmt.Errorf("ax: postgres: register schedules: %w", err)
		}
	}
	if len(defs) == 0 {
		return []store.Schedule{}, s.check("register schedules")
	}
	order := make([]int, len(defs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(defs[a].Name, defs[b].Name) })
	var out []store.Schedule
	err := s.tx(ctx, "register schedules", func(b *pgx.Batch) {
		chunks(order, func(part []int) {
			names, specs, zones := make([]string, len(part)), make([]string, len(part)), make([]string, len(part))
			overlaps, misfires := make([]string, len(part)), make([]string, len(part))
			payloads, nexts, traces := make([][]byte, len(part)), make([]time.Time, len(part)), make([]string, len(part))
			for k, i := range part {
				d := defs[i]
				names[k], specs[k], zones[k] = d.Name, d.Spec, d.TimeZone
				overlaps[k], misfires[k] = string(d.Overlap), string(d.Misfire)
				payloads[k], nexts[k], traces[k] = d.Payload, d.NextFireAt, d.Trace
			}
			b.Queue(registerSQL, names, specs, zones, overlaps, misfires, payloads, nexts, s.ns, traces)
		})
	}, func(br pgx.BatchResults) error {
		stored := make([]store.Schedule, 0, len(defs))
		err := readChunks(br, len(order), func(rows pgx.Rows) error {
			sc, err := scanSchedule(rows)
			if err != nil {
				return err
			}
			stored = append(stored, *sc)
			return nil
		})
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

// Schedules returns every schedule of the view's namespace, by name in byte order.
func (s *Store) Schedules(ctx context.Context) ([]store.Schedule, error) {
	if err := s.check("list schedules"); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+scheduleCols+` FROM ax_schedules s WHERE s.namespace = $1
		ORDER BY s.name COLLATE "C"`, s.ns)
	if err != nil {
		return nil, s.wrap("list schedules", err)
	}
	out, err := readSchedules(rows)
	if err != nil {
		return nil, s.wrap("list schedules", err)
	}
	return out, nil
}

// readScheduleSQL reads one schedule of namespace $2 by name.
const readScheduleSQL = `SELECT ` + scheduleCols + ` FROM ax_schedules s WHERE s.namespace = $2 AND s.name = $1`

// readSchedule reads the row of readScheduleSQL, nil when there is none.
func readSchedule(br pgx.BatchResults) (*store.Schedule, error) {
	sc, err := scanSchedule(br.QueryRow())
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return sc, err
}

const (
	// pauseSQL marks a schedule of namespace $2 paused, if it is not.
	pauseSQL = `UPDATE ax_schedules s SET paused = true, updated_at = clock_timestamp()
		WHERE s.namespace = $2 AND s.name = $1 AND NOT s.paused`

	// cancelOccurrencesSQL cancels the occurrences still SCHEDULED of a schedule of
	// namespace $2, locking them in id order first, like the execution path's
	// statements.
	cancelOccurrencesSQL = `WITH ts AS (SELECT clock_timestamp() AS now),
		l AS (SELECT t.id FROM ax_tasks t WHERE t.namespace = $2 AND t.name = $1 AND t.task_key = $1 AND t.status = 'SCHEDULED'
			ORDER BY t.id FOR NO KEY UPDATE)
		UPDATE ax_tasks t SET status = 'CANCELLED', finished_at = ts.now, updated_at = ts.now
		FROM l, ts
		WHERE t.id = l.id AND t.status = 'SCHEDULED'`
)

// PauseSchedule marks a schedule paused and cancels its occurrences still
// SCHEDULED, in one transaction (see store.Store). It takes two round trips: the
// cancellation is a statement of its own, run only if the pause applied, so that
// its snapshot, taken after the schedule's row lock was granted, sees the
// occurrences of a FireSchedule that committed while the pause waited for that lock.
func (s *Store) PauseSchedule(ctx context.Context, name string) (*store.Schedule, error) {
	var sc *store.Schedule
	err := s.steps(ctx, "pause schedule", func(r round) error {
		sc = nil
		var paused bool
		if err := r(false, func(b *pgx.Batch) { b.Queue(pauseSQL, name, s.ns) }, func(br pgx.BatchResults) error {
			tag, err := br.Exec()
			paused = tag.RowsAffected() == 1
			return err
		}); err != nil {
			return err
		}
		return r(true, func(b *pgx.Batch) {
			if paused {
				b.Queue(cancelOccurrencesSQL, name, s.ns)
			}
			b.Queue(readScheduleSQL, name, s.ns)
		}, func(br pgx.BatchResults) error {
			if paused {
				if _, err := br.Exec(); err != nil {
					return err
				}
			}
			var err error
			sc, err = readSchedule(br)
			return err
		})
	})
	switch {
	case err != nil:
		return nil, err
	case sc == nil:
		return nil, fmt.Errorf("ax: postgres: pause schedule %q: %w", name, store.ErrNotFound)
	}
	return sc, nil
}

// deleteScheduleSQL deletes the row of a schedule of namespace $2, locking it like
// pauseSQL.
const deleteScheduleSQL = `DELETE FROM ax_schedules s WHERE s.namespace = $2 AND s.name = $1`

// DeleteSchedule deletes a schedule's row and cancels its occurrences still
// SCHEDULED, in one transaction, and returns how many it cancelled (see
// store.Store). Like PauseSchedule it takes two round trips, and for the same
// reason: the cancellation's snapshot, taken after the row lock was granted, sees
// the occurrences of a FireSchedule that committed while the delete waited for it.
// An unknown name is store.ErrNotFound, an empty one store.ErrInvalid.
func (s *Store) DeleteSchedule(ctx context.Context, name string) (int, error) {
	if name == "" {
		return 0, fmt.Errorf("ax: postgres: delete schedule: empty name: %w", store.ErrInvalid)
	}
	var deleted bool
	var cancelled int64
	err := s.steps(ctx, "delete schedule", func(r round) error {
		deleted, cancelled = false, 0
		if err := r(false, func(b *pgx.Batch) { b.Queue(deleteScheduleSQL, name, s.ns) }, func(br pgx.BatchResults) error {
			tag, err := br.Exec()
			deleted = tag.RowsAffected() == 1
			return err
		}); err != nil || !deleted {
			return err // unknown: steps commits a transaction that wrote nothing
		}
		return r(true, func(b *pgx.Batch) { b.Queue(cancelOccurrencesSQL, name, s.ns) }, func(br pgx.BatchResults) error {
			tag, err := br.Exec()
			cancelled = tag.RowsAffected()
			return err
		})
	})
	switch {
	case err != nil:
		return 0, err
	case !deleted:
		return 0, fmt.Errorf("ax: postgres: delete schedule %q: %w", name, store.ErrNotFound)
	}
	return int(cancelled), nil
}

// resumeSQL clears the flag of paused schedule $1 of namespace $3 and sets its next
// fire time to $2, and records the gap of the slots it passes over (from the stored
// next fire time to $2). The row is locked first (o), so a concurrent resume waits and
// then, finding the schedule no longer paused, records nothing.
const resumeSQL = `WITH o AS (SELECT s.next_fire_at FROM ax_schedules s
		WHERE s.namespace = $3 AND s.name = $1 AND s.paused FOR NO KEY UPDATE),
	g AS (INSERT INTO ax_slot_gaps (namespace, schedule, from_at, until_at, why, result, created_at)
		SELECT $3, $1, o.next_fire_at, $2, '` + store.GapPaused + `', '` + store.PausedResult + `', clock_timestamp()
		FROM o WHERE o.next_fire_at < $2)
UPDATE ax_schedules s SET paused = false, next_fire_at = $2, updated_at = clock_timestamp()
	FROM o WHERE s.namespace = $3 AND s.name = $1`

// ResumeSchedule clears a paused schedule's flag and sets its NextFireAt to next; a
// schedule that is not paused is left alone (see store.Store). A zero next is
// store.ErrInvalid.
func (s *Store) ResumeSchedule(ctx context.Context, name string, next time.Time) (*store.Schedule, error) {
	if next.IsZero() {
		return nil, fmt.Errorf("ax: postgres: resume schedule %q: zero next fire time: %w", name, store.ErrInvalid)
	}
	var sc *store.Schedule
	err := s.tx(ctx, "resume schedule", func(b *pgx.Batch) {
		b.Queue(resumeSQL, name, next, s.ns)
		b.Queue(readScheduleSQL, name, s.ns)
	}, func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return err
		}
		var err error
		sc, err = readSchedule(br)
		return err
	})
	switch {
	case err != nil:
		return nil, err
	case sc == nil:
		return nil, fmt.Errorf("ax: postgres: resume schedule %q: %w", name, store.ErrNotFound)
	}
	return sc, nil
}

// fireSQL is FireSchedule's compare-and-set on a schedule of namespace $7. A
// concurrent call with the same Expect waits for the row lock and then, re-checking
// the condition on the row as that call left it, does not apply.
// The gaps ($8 to $11, unnested) are inserted by the same statement, for each row
// the compare-and-set changed: none when it did not apply.
const fireSQL = `WITH u AS (UPDATE ax_schedules s SET next_fire_at = $3, last_fire_at = COALESCE($4::timestamptz, s.last_fire_at),
		updated_at = clock_timestamp()
	WHERE s.namespace = $7 AND s.name = $1 AND s.next_fire_at = $2 AND NOT s.paused
		AND ($5 = '' OR (s.spec = $5 AND s.time_zone = $6))
	RETURNING s.name),
g AS (INSERT INTO ax_slot_gaps (namespace, schedule, from_at, until_at, why, result, created_at)
	SELECT $7, u.name, g.from_at, g.until_at, g.why, g.result, clock_timestamp()
	FROM u, unnest($8::timestamptz[], $9::timestamptz[], $10::text[], $11::text[]) AS g(from_at, until_at, why, result))
SELECT count(*) FROM u`

// FireSchedule advances a schedule and inserts its occurrences, in one transaction
// (see store.Store): the compare-and-set on next_fire_at, then, only if it applied,
// the very statements of Insert, so the occurrences are stamped for the refill and
// signalled like any inserted task. The occurrences are checked as Insert checks
// tasks. A fence with a token is checked first in the transaction (see fence.go).
func (s *Store) FireSchedule(ctx context.Context, p store.FireParams) (*store.FireResult, error) {
	if err := driverkit.CheckFire(p); err != nil {
		return nil, fmt.Errorf("ax: postgres: %w", err)
	}
	if err := driverkit.CheckFence(p.Fence); err != nil {
		return nil, fmt.Errorf("ax: postgres: fire schedule %q: %w", p.Name, err)
	}
	in, err := newInsertion(fmt.Sprintf("fire schedule %q", p.Name), s.ns, p.Tasks)
	if err != nil {
		return nil, err
	}
	in.release = true // a few occurrences: the release, not the check's second round
	var last *time.Time
	if !p.Last.IsZero() {
		last = &p.Last
	}
	res := &store.FireResult{}
	err = s.steps(ctx, "fire schedule", func(r round) error {
		res.Applied = false
		queue := func(b *pgx.Batch) {
			queueFence(b, p.Fence)
			gFrom, gUntil, gWhy, gResult := gapArrays(p.Gaps)
			b.Queue(fireSQL, p.Name, p.Expect, p.Next, last, p.Spec, p.TimeZone, s.ns, gFrom, gUntil, gWhy, gResult)
		}
		read := func(br pgx.BatchResults) error {
			if err := readFence(br, p.Fence); err != nil {
				return err
			}
			var n int64
			err := br.QueryRow().Scan(&n)
			res.Applied = n == 1
			return err
		}
		if err := r(len(in.tasks) == 0, queue, read); err != nil || len(in.tasks) == 0 || !res.Applied {
			return err // not applied: steps commits a transaction that wrote nothing
		}
		return r(true, func(b *pgx.Batch) { in.queue(b, s) }, in.read)
	})
	if err != nil {
		return nil, err
	}
	if !res.Applied {
		return res, nil
	}
	if err := in.resolveOnPool(ctx, s); err != nil {
		return nil, s.wrap("fire schedule", err)
	}
	res.Inserted = in.out
	return res, nil
}

// pauseScheduleIn is PauseSchedule's statements in q: the cancellation after the
// pause so that, at READ COMMITTED, its snapshot sees every occurrence committed
// before the schedule's row was locked.
func (s *Store) pauseScheduleIn(ctx context.Context, q txQuerier, name string) (*store.Schedule, error) {
	const op = "pause schedule in transaction"
	paused, err := q.count(ctx, pauseSQL, name, s.ns)
	if err == nil && paused == 1 {
		_, err = q.count(ctx, cancelOccurrencesSQL, name, s.ns)
	}
	if err != nil {
		return nil, s.wrap(op, err)
	}
	return s.scheduleIn(ctx, q, op, name)
}

// resumeScheduleIn is ResumeSchedule's statements in q.
func (s *Store) resumeScheduleIn(ctx context.Context, q txQuerier, name string, next time.Time) (*store.Schedule, error) {
	if next.IsZero() {
		return nil, fmt.Errorf("ax: postgres: resume schedule %q: zero next fire time: %w", name, store.ErrInvalid)
	}
	const op = "resume schedule in transaction"
	if _, err := q.count(ctx, resumeSQL, name, next, s.ns); err != nil {
		return nil, s.wrap(op, err)
	}
	return s.scheduleIn(ctx, q, op, name)
}

// scheduleIn reads schedule name in q, or ErrNotFound.
func (s *Store) scheduleIn(ctx context.Context, q txQuerier, op, name string) (*store.Schedule, error) {
	var sc *store.Schedule
	if err := q.query(ctx, readScheduleSQL, []any{name, s.ns}, func(rows txRows) error {
		if !rows.Next() {
			return nil
		}
		var err error
		sc, err = scanSchedule(rows)
		return err
	}); err != nil {
		return nil, s.wrap(op, err)
	}
	if sc == nil {
		return nil, fmt.Errorf("ax: postgres: %s %q: %w", op, name, store.ErrNotFound)
	}
	return sc, nil
}
