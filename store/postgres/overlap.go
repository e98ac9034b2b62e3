package postgres

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// Task keys (see DESIGN.md, "Task keys"). A task with a TaskKey and Overlap skip or
// queue may be handed out only while no other task of its namespace with the key is
// DISPATCHING or RUNNING. Claim and Trigger serialize on the key with a
// transaction-level advisory lock (keyLock, hash of the namespace and the key), taken
// before anything is read; under READ
// COMMITTED every later statement of the transaction takes its snapshot after the
// lock was granted, so it sees the claim of the previous holder of the lock, which
// has committed. The claiming UPDATE still carries the condition itself (NOT EXISTS
// a holder), so that the rule is part of the conditional write.

// keyLockClass is the first key (classid) of the task key advisory locks of a
// schema. It is negative, so it never equals a refill lock class (lockKey is
// non-negative), whose locks Refill reads back from pg_locks, of any schema.
func keyLockClass(schema string) int32 {
	h := fnv.New32a()
	h.Write([]byte("ax task key " + schema))
	return int32(h.Sum32() | 1<<31)
}

// keyLockID is the second key (objid) of the advisory lock of a task key of
// namespace ns: a hash of both, so that one key in two namespaces is two locks (task
// keys are per namespace). Two keys may share one: they then exclude each other for
// the length of a claim, nothing more.
func keyLockID(ns, taskKey string) int32 {
	h := fnv.New32a()
	h.Write([]byte(ns))
	h.Write([]byte{0}) // a namespace holds no NUL (nor does PostgreSQL text)
	h.Write([]byte(taskKey))
	return int32(h.Sum32())
}

// keyLockIDs returns the distinct lock ids of keys of namespace ns in ascending
// order: the order in which every transaction takes them, so that two cannot
// deadlock on them.
func keyLockIDs(ns string, keys []string) []int32 {
	ids := make([]int32, len(keys))
	for i, k := range keys {
		ids[i] = keyLockID(ns, k)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// nameLockIDs returns the distinct lock ids of the task names of namespace ns, in
// ascending order: a name's claims serialise on its lock, as a key's do, in the same
// lock class. A name's id hashes a NUL before it, which no key holds, so that a name
// and a key of one text are two locks.
func nameLockIDs(ns string, names []string) []int32 {
	ids := make([]int32, len(names))
	for i, n := range names {
		ids[i] = keyLockID(ns, "\x00"+n)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// keyed reports whether a task's key restricts it: a key, and Overlap skip or queue.
func keyed(t *store.Task) bool { return t.TaskKey != "" && t.Overlap != store.OverlapAllow }

const (
	// keyLockSQL takes the advisory locks of the given ids, in array order
	// (ascending), each held until the transaction ends.
	keyLockSQL = `SELECT pg_advisory_xact_lock($1::int4, k) FROM unnest($2::int4[]) AS k`

	// holdersSQL returns, for the given keys of namespace $2, the lowest id of a task
	// holding each, and how many do: the ax_tasks_key_held index holds exactly the
	// candidates.
	holdersSQL = `SELECT t.task_key, min(t.id), count(*) FROM ax_tasks t
		WHERE t.namespace = $2 AND t.task_key = ANY($1::text[]) AND t.task_key <> '' AND t.status IN ('DISPATCHING', 'RUNNING')
		GROUP BY t.task_key`

	// keyedLockSQL locks the keyed tasks a Claim found due, in id order, and reads
	// them as they are now: still SCHEDULED (and of namespace $2, as the claim
	// statement found them), and whether still due.
	keyedLockSQL = `WITH ts AS (SELECT clock_timestamp() AS now)
		SELECT t.id, t.due_at, t.name, t.task_key, t.overlap, t.due_at <= ts.now FROM ax_tasks t, ts
		WHERE t.id = ANY($1::bigint[]) AND t.namespace || '' = $2 AND t.status || '' = 'SCHEDULED'
		ORDER BY t.id FOR NO KEY UPDATE OF t`

	// keyedClaimSQL claims the winners ResolveKeys chose. The count of the key's
	// holders below the winner's admits (its name's key concurrency, at least one;
	// counted up to it, so that one admitted costs what NOT EXISTS did) repeats the
	// key's rule inside the write: under the key's lock it holds unless a task of the
	// namespace with the key and Overlap allow was claimed meanwhile (allow tasks take
	// no lock). A name's limit is not repeated: every claim of a limited name's task
	// runs here, under the name's lock.
	keyedClaimSQL = `WITH ts AS (SELECT COALESCE($3::timestamptz, clock_timestamp()) AS now),
		c AS (SELECT * FROM unnest($1::bigint[], $2::text[], $4::int[]) AS c(id, eid, admits))
		UPDATE ax_tasks t SET status = 'DISPATCHING', execution_id = c.eid, dispatched_at = ts.now, updated_at = ts.now
		FROM c, ts
		WHERE t.id = c.id AND t.status || '' = 'SCHEDULED' AND t.due_at <= ts.now
			AND (t.overlap = 'allow' OR (SELECT count(*) FROM (SELECT 1 FROM ax_tasks o
				WHERE o.namespace = t.namespace AND o.task_key = t.task_key AND o.task_key <> ''
					AND o.status IN ('DISPATCHING', 'RUNNING') LIMIT c.admits) h) < c.admits)
		RETURNING ` + taskCols

	// limitsSQL reads, under the names' locks, the limits of each of the names $1 of
	// namespace $2 that has one (nameLimits), with the store's time
	// (statement_timestamp: one for every row, after the locks were granted, which
	// the claims of a name with any rate record, its rate per key alone included):
	// the concurrency limit and the tasks DISPATCHING or RUNNING — counted through
	// the partial indexes of those statuses (the name is compared as an expression, so
	// that the business key's index, which holds every task of the name, finished or
	// not, cannot serve it), at a cost that grows with the namespace's tasks in flight
	// — the rate limit with its claim times, the key concurrency and the rate per key.
	limitsSQL = `SELECT p.name, p.concurrency, CASE WHEN p.concurrency > 0 THEN
			(SELECT count(*) FROM ax_tasks t WHERE t.namespace = $2 AND t.status = 'DISPATCHING' AND t.name || '' = p.name)
			+ (SELECT count(*) FROM ax_tasks t WHERE t.namespace = $2 AND t.status = 'RUNNING' AND t.name || '' = p.name) ELSE 0 END,
			p.rate, p.rate_per_us, p.rate_starts, p.key_concurrency, p.key_rate, p.key_rate_per_us, statement_timestamp()
		FROM ax_names p WHERE p.namespace = $2 AND p.name = ANY($1::text[]) AND (` + nameLimits + `)`

	// keyStartsSQL reads, under the keys' locks, the claim times recorded for the
	// (name, task key) pairs $2, $3 of namespace $1 (a pair without a row has none),
	// each through the primary key.
	keyStartsSQL = `SELECT k.name, k.task_key, k.starts
		FROM unnest($2::text[], $3::text[]) AS u(name, task_key)
		JOIN ax_key_starts k ON k.namespace = $1 AND k.name = u.name AND k.task_key = u.task_key`

	// keyStartsWriteSQL records the claim times $4 (driverkit.EncodeStarts) and the
	// last of them $5 of the (name, task key) pairs $2, $3 of namespace $1, in the
	// claim's transaction, under the keys' locks.
	keyStartsWriteSQL = `INSERT INTO ax_key_starts AS k (namespace, name, task_key, starts, last_at)
		SELECT $1, u.name, u.task_key, u.starts, u.last_at
		FROM unnest($2::text[], $3::text[], $4::bytea[], $5::timestamptz[]) AS u(name, task_key, starts, last_at)
		ON CONFLICT (namespace, name, task_key) DO UPDATE SET starts = EXCLUDED.starts, last_at = EXCLUDED.last_at`

	// startsSQL records the claim times of the rate-limited names $2 of namespace $1
	// (driverkit.EncodeStarts), in the claim's transaction, under their locks.
	startsSQL = `UPDATE ax_names n SET rate_starts = u.starts
		FROM unnest($2::text[], $3::bytea[]) AS u(name, starts)
		WHERE n.namespace = $1 AND n.name = u.name`

	// keyedSkipSQL moves the losers with Overlap skip to SKIPPED, with the reason.
	keyedSkipSQL = `WITH ts AS (SELECT clock_timestamp() AS now),
		c AS (SELECT * FROM unnest($1::bigint[], $2::text[]) AS c(id, reason))
		UPDATE ax_tasks t SET status = 'SKIPPED', last_error = c.reason, finished_at = ts.now, updated_at = ts.now
		FROM c, ts
		WHERE t.id = c.id AND t.status || '' = 'SCHEDULED'
		RETURNING ` + taskCols
)

// readHolders reads the rows of holdersSQL.
func readHolders(br pgx.BatchResults) (map[string]driverkit.KeyHold, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return scanHolders(rows)
}

// scanHolders reads rows of holdersSQL.
func scanHolders(rows txRows) (map[string]driverkit.KeyHold, error) {
	held := map[string]driverkit.KeyHold{}
	for rows.Next() {
		var key string
		var h driverkit.KeyHold
		var n int64
		if err := rows.Scan(&key, &h.First, &n); err != nil {
			return nil, err
		}
		h.Count = int(n)
		held[key] = h
	}
	return held, rows.Err()
}

// readLimits reads the rows of limitsSQL: each limited name's limits, and the
// store's time (zero without rows).
func readLimits(br pgx.BatchResults) (map[string]*driverkit.NameLimit, time.Time, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, time.Time{}, err
	}
	defer rows.Close()
	names := map[string]*driverkit.NameLimit{}
	var now time.Time
	for rows.Next() {
		var (
			name                             string
			concurrency, rate, keys, keyRate int32
			inFlight, perUS, keyPerUS        int64
			starts                           []byte
		)
		if err := rows.Scan(&name, &concurrency, &inFlight, &rate, &perUS, &starts, &keys, &keyRate, &keyPerUS, &now); err != nil {
			return nil, time.Time{}, err
		}
		n := &driverkit.NameLimit{Concurrency: int(concurrency), InFlight: int(inFlight), Rate: int(rate),
			Per: time.Duration(perUS) * time.Microsecond, KeyConcurrency: int(keys),
			KeyRate: int(keyRate), KeyPer: time.Duration(keyPerUS) * time.Microsecond}
		if n.Starts, err = driverkit.DecodeStarts(starts); err != nil {
			return nil, time.Time{}, fmt.Errorf("name %q: %w", name, err)
		}
		names[name] = n
	}
	return names, now.UTC(), rows.Err()
}

// readKeyStarts reads the rows of keyStartsSQL into the limits of names with a rate
// per task key (read by limitsSQL in the same round); the rows of a name without one
// (removed since they were written) are left out.
func readKeyStarts(br pgx.BatchResults, names map[string]*driverkit.NameLimit) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name, key string
		var starts []byte
		if err := rows.Scan(&name, &key, &starts); err != nil {
			return err
		}
		if err := driverkit.SetKeyStarts(names, name, key, starts); err != nil {
			return err
		}
	}
	return rows.Err()
}

// keyStartsArrays are the claim times per task key that names' winners changed
// (NameLimit.KeyChanged), as the columns keyStartsWriteSQL unnests, in (name, key)
// order.
func keyStartsArrays(limits map[string]*driverkit.NameLimit) (names, keys []string, starts [][]byte, last []time.Time) {
	for _, name := range slices.Sorted(maps.Keys(limits)) {
		n := limits[name]
		for _, key := range slices.Sorted(slices.Values(n.KeyChanged)) {
			ts := n.KeyStarts[key] // holds the winner's start: never empty
			names, keys = append(names, name), append(keys, key)
			starts, last = append(starts, driverkit.EncodeStarts(ts)), append(last, ts[len(ts)-1])
		}
	}
	return names, keys, starts, last
}

// nameTaskKey is a task name and a task key of its tasks.
type nameTaskKey struct{ name, taskKey string }

// nameKeyArrays returns the distinct pairs, sorted, as the columns keyStartsSQL
// unnests.
func nameKeyArrays(pairs []nameTaskKey) (names, keys []string) {
	sorted := slices.SortedFunc(slices.Values(pairs), func(a, b nameTaskKey) int {
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.taskKey, b.taskKey))
	})
	for _, p := range slices.Compact(sorted) {
		names, keys = append(names, p.name), append(keys, p.taskKey)
	}
	return names, keys
}

// appendTask returns a row function for readChunks that appends taskCols rows to
// into.
func appendTask(into *[]store.Task) func(rows pgx.Rows) error {
	return func(rows pgx.Rows) error {
		t, err := scanTask(rows)
		if err != nil {
			return err
		}
		*into = append(*into, *t)
		return nil
	}
}

// claimKeyed applies the overlap rule and the names' limits to the due tasks that
// the claim statement left SCHEDULED for them (candidates, in id order, with their
// execution ids; keys, the keys that restrict some of them, names, the limited names
// among them, and pairs, the names and keys of the candidates of a limited name
// whose key restricts them, in any order), in a transaction of its own: two round
// trips.
//
//	round 1: BEGIN; plans; check the fence (if it has a token); lock the keys and
//	         the names (one ascending list of lock ids, so that two claims cannot
//	         deadlock); lock and re-read the candidates (ascending ids); read the
//	         holders of the keys; read the names' limits and tasks in flight; read
//	         the claim times of the pairs
//	(Go)     driverkit.ResolveKeys: winners by key, by free slot and by the rates,
//	         the others skipped, blocked or limited
//	round 2: claim the winners (… AND NOT EXISTS a holder of a key); skip the skip
//	         losers; record the names' and the keys' claim times; COMMIT
//
// It adds its outcomes to res.
func (s *Store) claimKeyed(ctx context.Context, fence store.Fence, candidates []store.Claim, keys, names []string, pairs []nameTaskKey, res *store.ClaimResult) error {
	eids := make(map[int64]string, len(candidates))
	ids := make([]int64, len(candidates))
	for i, c := range candidates {
		ids[i] = c.ID
		eids[c.ID] = c.ExecutionID
	}
	distinct := slices.Compact(slices.Sorted(slices.Values(keys)))
	distinctNames := slices.Compact(slices.Sorted(slices.Values(names)))
	locks := append(keyLockIDs(s.ns, distinct), nameLockIDs(s.ns, distinctNames)...)
	slices.Sort(locks)
	locks = slices.Compact(locks)
	pairNames, pairKeys := nameKeyArrays(pairs)

	var (
		claimed, skipped []store.Task
		notDue           []store.Due
		blocked          []store.Blocked
		limited          []store.Limited
	)
	err := s.steps(ctx, "claim", func(r round) error {
		claimed, skipped, notDue, blocked, limited = nil, nil, nil, nil, nil
		var due []driverkit.Keyed
		var holders map[string]driverkit.KeyHold
		var names map[string]*driverkit.NameLimit
		var now time.Time
		err := r(false, func(b *pgx.Batch) {
			queueFence(b, fence)
			b.Queue(keyLockSQL, s.keyLock, locks)
			chunks(ids, func(part []int64) { b.Queue(keyedLockSQL, part, s.ns) })
			b.Queue(holdersSQL, distinct, s.ns)
			if len(distinctNames) > 0 {
				b.Queue(limitsSQL, distinctNames, s.ns)
			}
			// The keys' claim times, read after their locks were granted (the
			// statement's snapshot is taken then): the last claim of each key has
			// committed its times.
			if len(pairNames) > 0 {
				b.Queue(keyStartsSQL, s.ns, pairNames, pairKeys)
			}
		}, func(br pgx.BatchResults) error {
			if err := readFence(br, fence); err != nil {
				return err
			}
			if _, err := br.Exec(); err != nil {
				return err
			}
			err := readChunks(br, len(ids), func(rows pgx.Rows) error {
				var (
					k       driverkit.Keyed
					overlap string
					isDue   bool
				)
				if err := rows.Scan(&k.ID, &k.DueAt, &k.Name, &k.TaskKey, &overlap, &isDue); err != nil {
					return err
				}
				k.DueAt, k.Overlap = k.DueAt.UTC(), store.OverlapPolicy(overlap)
				if isDue {
					due = append(due, k)
				} else { // made SCHEDULED again, later, since the claim statement read it
					notDue = append(notDue, store.Due{ID: k.ID, DueAt: k.DueAt})
				}
				return nil
			})
			if err != nil {
				return err
			}
			if holders, err = readHolders(br); err != nil {
				return err
			}
			if len(distinctNames) > 0 {
				if names, now, err = readLimits(br); err != nil {
					return err
				}
			}
			if len(pairNames) > 0 {
				err = readKeyStarts(br, names)
			}
			return err
		})
		if err != nil {
			return err
		}
		win, skip, block, over := driverkit.ResolveKeys(due, holders, names, now)
		for _, k := range block {
			blocked = append(blocked, store.Blocked{Due: store.Due{ID: k.ID, DueAt: k.DueAt}, TaskKey: k.TaskKey})
		}
		for _, k := range over {
			l := store.Limited{Due: store.Due{ID: k.ID, DueAt: k.DueAt}, Name: k.Name, Limit: k.Limit, RetryAt: k.RetryAt}
			if k.KeyLimited { // its name's rate per key, not the name's own limits
				l.TaskKey = k.TaskKey
			}
			limited = append(limited, l)
		}
		var rated []string // names whose claim times change, and their times
		var starts [][]byte
		for name, n := range names {
			if n.Changed {
				rated, starts = append(rated, name), append(starts, driverkit.EncodeStarts(n.Starts))
			}
		}
		keyNames, keyKeys, keyStarts, keyLast := keyStartsArrays(names)
		// The winners' DispatchedAt is the time their names' rates, and rates per key,
		// recorded: the store's, read under the locks (zero without a limited name: the
		// claim's own).
		var at *time.Time
		if !now.IsZero() {
			at = &now
		}
		if len(win)+len(skip) == 0 {
			return nil // nothing to write: steps commits
		}
		// The winners are written in the order ResolveKeys chose them, (DueAt, ID): a
		// chunk's in-write check sees the chunks before it, so a key shared by names
		// that admit different numbers must be filled as it was decided.
		slices.SortFunc(win, func(a, b driverkit.Keyed) int {
			if c := a.DueAt.Compare(b.DueAt); c != 0 {
				return c
			}
			return cmp.Compare(a.ID, b.ID)
		})
		return r(true, func(b *pgx.Batch) {
			chunks(win, func(part []driverkit.Keyed) {
				wids, weids, admits := make([]int64, len(part)), make([]string, len(part)), make([]int32, len(part))
				for i, k := range part {
					wids[i], weids[i], admits[i] = k.ID, eids[k.ID], 1
					if n := names[k.Name]; n != nil && n.KeyConcurrency > 1 {
						admits[i] = int32(n.KeyConcurrency)
					}
				}
				b.Queue(keyedClaimSQL, wids, weids, at, admits)
			})
			chunks(skip, func(part []driverkit.Keyed) {
				sids, reasons := make([]int64, len(part)), make([]string, len(part))
				for i, k := range part {
					sids[i], reasons[i] = k.ID, driverkit.SkipReason(k.TaskKey, k.Holder)
				}
				b.Queue(keyedSkipSQL, sids, reasons)
			})
			if len(rated) > 0 {
				b.Queue(startsSQL, s.ns, rated, starts)
			}
			if len(keyNames) > 0 {
				b.Queue(keyStartsWriteSQL, s.ns, keyNames, keyKeys, keyStarts, keyLast)
			}
		}, func(br pgx.BatchResults) error {
			if err := readChunks(br, len(win), appendTask(&claimed)); err != nil {
				return err
			}
			if err := readChunks(br, len(skip), appendTask(&skipped)); err != nil {
				return err
			}
			if len(rated) > 0 {
				if _, err := br.Exec(); err != nil {
					return err
				}
			}
			if len(keyNames) > 0 {
				if _, err := br.Exec(); err != nil {
					return err
				}
			}
			// A winner the UPDATE refused found its key taken by a task with Overlap
			// allow, claimed without the lock since the holders were read. It is still
			// SCHEDULED and due (its row is locked): report it blocked, so that the
			// caller asks again and it is then skipped or claimed by the rule.
			got := make(map[int64]bool, len(claimed))
			for _, t := range claimed {
				got[t.ID] = true
			}
			for _, k := range win {
				if !got[k.ID] {
					blocked = append(blocked, store.Blocked{Due: store.Due{ID: k.ID, DueAt: k.DueAt}, TaskKey: k.TaskKey})
				}
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	res.Claimed = append(res.Claimed, claimed...)
	res.Skipped = append(res.Skipped, skipped...)
	res.NotDue = append(res.NotDue, notDue...)
	res.Blocked = append(res.Blocked, blocked...)
	res.Limited = append(res.Limited, limited...)
	return nil
}

// triggerKeyedSQL is Trigger's UPDATE for a keyed task of namespace $3, run under
// the key's lock: it applies only while no other task of the namespace holds the key.
const triggerKeyedSQL = `UPDATE ax_tasks t SET status = 'DISPATCHING', execution_id = $2,
		attempt = t.attempt + CASE t.status WHEN 'FAILED' THEN 1 ELSE 0 END,
		finished_at = NULL, dispatched_at = ts.now, triggered_at = ts.now, updated_at = ts.now
	FROM (SELECT clock_timestamp() AS now) ts
	WHERE t.id = $1 AND t.namespace || '' = $3 AND t.status IN ('SCHEDULED', 'FAILED') AND t.key_slot = 0
		AND NOT ` + limitedName + `
		AND NOT EXISTS (SELECT 1 FROM ax_tasks o
			WHERE o.namespace = t.namespace AND o.task_key = t.task_key AND o.task_key <> ''
				AND o.status IN ('DISPATCHING', 'RUNNING'))
	RETURNING ` + taskCols

// triggerKeyed is Trigger for a task whose key restricts it: one transaction, one
// round trip (BEGIN; plans; lock the key; read its holder; the conditional
// UPDATE; read the task; COMMIT). It returns the task, and whether it moved or
// else the holder of its key, if any.
func (s *Store) triggerKeyed(ctx context.Context, id int64, executionID, taskKey string) (t *store.Task, applied bool, holder int64, err error) {
	err = s.tx(ctx, "trigger", func(b *pgx.Batch) {
		b.Queue(keyLockSQL, s.keyLock, []int32{keyLockID(s.ns, taskKey)})
		b.Queue(holdersSQL, []string{taskKey}, s.ns)
		b.Queue(triggerKeyedSQL, id, executionID, s.ns)
		b.Queue(getSQL, id, s.ns)
	}, func(br pgx.BatchResults) error {
		t, applied, holder = nil, false, 0
		if _, err := br.Exec(); err != nil {
			return err
		}
		held, err := readHolders(br)
		if err != nil {
			return err
		}
		holder = held[taskKey].First
		t, applied, err = readTransition(br)
		return err
	})
	return t, applied, holder, err
}

// sortResult puts every list of a ClaimResult in id order.
func sortResult(res *store.ClaimResult) {
	byID := func(a, b store.Task) int { return cmp.Compare(a.ID, b.ID) }
	slices.SortFunc(res.Claimed, byID)
	slices.SortFunc(res.Started, byID)
	slices.SortFunc(res.Skipped, byID)
	slices.SortFunc(res.NotDue, func(a, b store.Due) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(res.Paused, func(a, b store.Due) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(res.Blocked, func(a, b store.Blocked) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(res.Limited, func(a, b store.Limited) int { return cmp.Compare(a.ID, b.ID) })
}

// triggerOp names a Trigger call in errors.
func triggerOp(id int64) string { return fmt.Sprintf("ax: postgres: trigger task %d", id) }
