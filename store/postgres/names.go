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

// heldName is pausedName for a name paused or limited: a claim statement leaves such a
// name's tasks alone. Its first EXISTS, too, is evaluated once per statement.
const heldName = `(EXISTS (SELECT 1 FROM ax_names p WHERE p.namespace = $3 AND (p.paused OR ` + nameLimits + `))
		AND EXISTS (SELECT 1 FROM ax_names p WHERE p.namespace = $3 AND p.name = t.name AND (p.paused OR ` + nameLimits + `)))`

// nameLimits is true of a row p of ax_names with a limit the claim applies under the
// name's lock: a concurrency or a rate limit, a key concurrency above one, or a rate
// per task key.
const nameLimits = `p.concurrency > 0 OR p.rate > 0 OR p.key_concurrency > 1 OR p.key_rate > 0`

// limitedName is true, over ax_tasks t of namespace $3, when t's name has a limit
// (nameLimits).
const limitedName = `EXISTS (SELECT 1 FROM ax_names p WHERE p.namespace = $3 AND p.name = t.name AND (` + nameLimits + `))`

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
	// setConcurrencySQL sets the limit of name $2 of namespace $1 to $4 for $3, unless
	// it has it; a name never stored is stored only for a limit.
	setConcurrencySQL = `INSERT INTO ax_names AS n (namespace, name, concurrency, changed_by, changed_at)
		SELECT $1, $2, $4, $3, clock_timestamp()
		WHERE $4::int > 0 OR EXISTS (SELECT 1 FROM ax_names WHERE namespace = $1 AND name = $2)
		ON CONFLICT (namespace, name) DO UPDATE SET concurrency = $4, changed_by = $3, changed_at = clock_timestamp()
			WHERE n.concurrency <> $4`
	// setRateSQL sets the rate limit of name $2 of namespace $1 to $4 per $5
	// microseconds for $3, unless it has it; a name never stored is stored only for a
	// limit. Removing the limit forgets the claims recorded for it.
	setRateSQL = `INSERT INTO ax_names AS n (namespace, name, rate, rate_per_us, changed_by, changed_at)
		SELECT $1, $2, $4, $5, $3, clock_timestamp()
		WHERE $4::int > 0 OR EXISTS (SELECT 1 FROM ax_names WHERE namespace = $1 AND name = $2)
		ON CONFLICT (namespace, name) DO UPDATE SET rate = $4, rate_per_us = $5, changed_by = $3, changed_at = clock_timestamp(),
			rate_starts = CASE WHEN $4::int = 0 THEN ''::bytea ELSE n.rate_starts END
			WHERE n.rate <> $4 OR n.rate_per_us <> $5`
	// nameSQL reads the state of name $2 of namespace $1.
	nameSQL = `SELECT ` + nameCols + ` FROM ax_names WHERE namespace = $1 AND name = $2`
	// nameCols are the columns scanNameState reads.
	nameCols = `name, paused, concurrency, rate, rate_per_us, key_concurrency, key_rate, key_rate_per_us, changed_by, changed_at`
	// setKeyConcurrencySQL sets the key concurrency of name $2 of namespace $1 to $4
	// for $3, unless it has it; a name never stored is stored only for one above 0.
	setKeyConcurrencySQL = `INSERT INTO ax_names AS n (namespace, name, key_concurrency, changed_by, changed_at)
		SELECT $1, $2, $4, $3, clock_timestamp()
		WHERE $4::int > 0 OR EXISTS (SELECT 1 FROM ax_names WHERE namespace = $1 AND name = $2)
		ON CONFLICT (namespace, name) DO UPDATE SET key_concurrency = $4, changed_by = $3, changed_at = clock_timestamp()
			WHERE n.key_concurrency <> $4`
	// setKeyRateSQL sets the rate limit per task key of name $2 of namespace $1 to $4
	// per $5 microseconds for $3, unless it has it; a name never stored is stored only
	// for a limit. The claim times recorded per key stay (ax_key_starts): a rate set
	// again counts them, and PruneKeyStarts drops them once no window reaches them.
	setKeyRateSQL = `INSERT INTO ax_names AS n (namespace, name, key_rate, key_rate_per_us, changed_by, changed_at)
		SELECT $1, $2, $4, $5, $3, clock_timestamp()
		WHERE $4::int > 0 OR EXISTS (SELECT 1 FROM ax_names WHERE namespace = $1 AND name = $2)
		ON CONFLICT (namespace, name) DO UPDATE SET key_rate = $4, key_rate_per_us = $5, changed_by = $3, changed_at = clock_timestamp()
			WHERE n.key_rate <> $4 OR n.key_rate_per_us <> $5`
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

// SetConcurrency sets the task name's concurrency limit in the view's namespace (see
// store.NameKeeper). Claims of the name serialise on its advisory lock (claimKeyed),
// not on this row.
func (s *Store) SetConcurrency(ctx context.Context, name string, n int, by string) (*store.NameState, error) {
	if err := driverkit.CheckConcurrency(name, n, by); err != nil {
		return nil, fmt.Errorf("ax: postgres: set concurrency of name %q: %w", name, err)
	}
	if n > 0 {
		s.limits.limited.Store(true) // this view's finishes signal from now on
	}
	return s.setName(ctx, "set concurrency", name, setConcurrencySQL, s.ns, name, by, n)
}

// setName runs set, a write of the task name's row with args, and reads the name's
// state, in one transaction: the zero state, with Name, when the name was never
// stored (set stores no row for a value that is the default).
func (s *Store) setName(ctx context.Context, op, name, set string, args ...any) (*store.NameState, error) {
	st := &store.NameState{Name: name}
	err := s.tx(ctx, op, func(b *pgx.Batch) {
		b.Queue(set, args...)
		b.Queue(nameSQL, s.ns, name)
	}, func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return err
		}
		got, err := scanNameState(br.QueryRow())
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // never stored, and nothing to set
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

// nameLimitedSQL reads whether name $2 of namespace $1 has a concurrency or a rate
// limit, or a rate per task key, and whether it has a key concurrency above one.
const nameLimitedSQL = `SELECT COALESCE(bool_or(concurrency > 0 OR rate > 0 OR key_rate > 0), false), COALESCE(bool_or(key_concurrency > 1), false)
	FROM ax_names WHERE namespace = $1 AND name = $2`

// SetRate sets the task name's rate limit in the view's namespace (see
// store.NameKeeper). Claims of the name serialise on its advisory lock (claimKeyed),
// and read and write the claim times recorded with it there.
func (s *Store) SetRate(ctx context.Context, name string, n int, per time.Duration, by string) (*store.NameState, error) {
	if err := driverkit.CheckRate(name, n, per, by); err != nil {
		return nil, fmt.Errorf("ax: postgres: set rate of name %q: %w", name, err)
	}
	if n == 0 {
		per = 0
	}
	return s.setName(ctx, "set rate", name, setRateSQL, s.ns, name, by, n, per.Microseconds())
}

// nameLimitedIn reads nameLimitedSQL for the task name in the view's namespace, in
// q's transaction.
func (s *Store) nameLimitedIn(ctx context.Context, q txQuerier, name string) (limited, keys bool, err error) {
	err = q.query(ctx, nameLimitedSQL, []any{s.ns, name}, func(rows txRows) error {
		for rows.Next() {
			if err := rows.Scan(&limited, &keys); err != nil {
				return err
			}
		}
		return nil
	})
	return limited, keys, err
}

// SetKeyConcurrency sets how many of the task name's tasks sharing a key may run at
// once, in the view's namespace (see store.NameKeeper); 1 is stored as 0, the rule
// of one. Claims of keys serialise on the keys' advisory locks, and read it there.
func (s *Store) SetKeyConcurrency(ctx context.Context, name string, n int, by string) (*store.NameState, error) {
	if err := driverkit.CheckConcurrency(name, n, by); err != nil {
		return nil, fmt.Errorf("ax: postgres: set key concurrency of name %q: %w", name, err)
	}
	if n == 1 {
		n = 0
	}
	return s.setName(ctx, "set key concurrency", name, setKeyConcurrencySQL, s.ns, name, by, n)
}

// SetKeyRate sets the task name's rate limit per task key in the view's namespace
// (see store.NameKeeper). Claims of a key serialise on its advisory lock
// (claimKeyed), and read and write the key's claim times (ax_key_starts) there.
func (s *Store) SetKeyRate(ctx context.Context, name string, n int, per time.Duration, by string) (*store.NameState, error) {
	if err := driverkit.CheckRate(name, n, per, by); err != nil {
		return nil, fmt.Errorf("ax: postgres: set key rate of name %q: %w", name, err)
	}
	if n == 0 {
		per = 0
	}
	return s.setName(ctx, "set key rate", name, setKeyRateSQL, s.ns, name, by, n, per.Microseconds())
}

// pruneKeyStartsSQL deletes up to $3 rows of ax_key_starts of namespace $1 whose last
// claim is at least $2 microseconds before the store's time, oldest first, found on
// ax_key_starts_last and deleted by their physical position (a TID scan), so that
// the DELETE never joins with the whole table. The bound is an expression of
// statement_timestamp(), one value for the statement, not a CTE's column, so that it
// is part of the index condition: the scan stops at the first row a window still
// reaches. A row a claim rewrote meanwhile has moved, and its last claim is recent:
// the condition on last_at, checked again on the row as it is once the claim
// committed, keeps it.
const pruneKeyStartsSQL = `DELETE FROM ax_key_starts WHERE ctid = ANY(ARRAY(
		SELECT o.ctid FROM ax_key_starts o
		WHERE o.namespace = $1 AND o.last_at <= statement_timestamp() - $2 * interval '1 microsecond' ORDER BY o.last_at LIMIT $3))
	AND last_at <= statement_timestamp() - $2 * interval '1 microsecond'`

// PruneKeyStarts deletes up to limit of the view's namespace's claim times kept per
// task name and key whose last claim no window of a rate per key reaches (see
// store.Pruner).
func (s *Store) PruneKeyStarts(ctx context.Context, limit int) (int, error) {
	if limit < 1 || limit > store.MaxPrune {
		return 0, fmt.Errorf("ax: postgres: prune key starts: limit %d is outside 1..%d: %w", limit, store.MaxPrune, store.ErrInvalid)
	}
	if err := s.check("prune key starts"); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, pruneKeyStartsSQL, s.ns, store.MaxRatePer.Microseconds(), limit)
	if err != nil {
		return 0, s.wrap("prune key starts", err)
	}
	return int(tag.RowsAffected()), nil
}

// namesSQL reads every name of namespace $1, with the tasks in flight of each limited
// one, counted as limitsSQL counts them.
const namesSQL = `SELECT ` + nameCols + `, CASE WHEN n.concurrency > 0 THEN
		(SELECT count(*) FROM ax_tasks t WHERE t.namespace = $1 AND t.status = 'DISPATCHING' AND t.name || '' = n.name)
		+ (SELECT count(*) FROM ax_tasks t WHERE t.namespace = $1 AND t.status = 'RUNNING' AND t.name || '' = n.name) ELSE 0 END
	FROM ax_names n WHERE n.namespace = $1 ORDER BY n.name`

// Names returns the state of every name of the view's namespace ever paused or
// limited, with the slots in use of the limited ones.
func (s *Store) Names(ctx context.Context) ([]store.NameState, error) {
	if err := s.check("list names"); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, namesSQL, s.ns)
	if err != nil {
		return nil, s.wrap("list names", err)
	}
	defer rows.Close()
	out := []store.NameState{}
	for rows.Next() {
		var st store.NameState
		var at time.Time
		var inFlight, perUS, keyPerUS int64
		if err := rows.Scan(&st.Name, &st.Paused, &st.Concurrency, &st.Rate, &perUS, &st.KeyConcurrency, &st.KeyRate, &keyPerUS, &st.ChangedBy, &at, &inFlight); err != nil {
			return nil, s.wrap("list names", err)
		}
		st.ChangedAt, st.InFlight, st.Per = at.UTC(), int(inFlight), time.Duration(perUS)*time.Microsecond
		st.KeyPer = time.Duration(keyPerUS) * time.Microsecond
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("list names", err)
	}
	return out, nil
}

// scanNameState reads a row of nameCols.
func scanNameState(row scanner) (*store.NameState, error) {
	var st store.NameState
	var at time.Time
	var perUS, keyPerUS int64
	if err := row.Scan(&st.Name, &st.Paused, &st.Concurrency, &st.Rate, &perUS, &st.KeyConcurrency, &st.KeyRate, &keyPerUS, &st.ChangedBy, &at); err != nil {
		return nil, err
	}
	st.ChangedAt, st.Per, st.KeyPer = at.UTC(), time.Duration(perUS)*time.Microsecond, time.Duration(keyPerUS)*time.Microsecond
	return &st, nil
}
