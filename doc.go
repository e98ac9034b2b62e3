// Package ax is an embeddable, persistent task scheduler: delayed tasks ("close this
// unpaid order in 30 minutes"), tasks at a time, retries and crash recovery, inside
// the Go service that owns them, with all state in a database you choose.
//
//	st, err := sqlite.Open("ax.db") // or another store
//	s, err := ax.New(ax.Config{Store: st, OwnerService: "order-service"})
//	s.HandleFunc("order.close.timeout", closeOrder, ax.WithMaxRetry(5))
//	err = s.Start(ctx)
//	t, err := s.Delay(ctx, "order.close.timeout", orderID, 30*time.Minute, ax.WithPayload(b))
//	err = s.Cancel(ctx, "order.close.timeout", orderID) // paid in time
//	err = s.Stop(ctx)
//
// # Tasks and their states
//
// A task is identified by its id and by its business key (Name, Key), which is unique
// among the tasks that hold it: submitting the same name and key again returns the
// existing task with ErrDuplicate while it holds the key — while it is live and, by
// default, once it FAILED — and creates a new task once it SUCCEEDED, was CANCELLED
// or SKIPPED (see Unique and WithUnique for longer holds and dedup windows).
// Every change of state is one conditional write in the store (UPDATE … WHERE id = ?
// AND status = old [AND execution_id = ?]); a write whose condition no longer holds
// changes nothing.
//
//	state        meaning                                         may move to
//	SCHEDULED    persisted, waiting for DueAt                    RUNNING (claim and start), DISPATCHING, CANCELLED, SKIPPED
//	DISPATCHING  due; claimed, being handed to an executor       RUNNING, SCHEDULED (dispatch retry), FAILED, CANCELLED
//	RUNNING      the execution is recorded; the handler runs     SUCCEEDED, SCHEDULED (retry, snooze, release), FAILED,
//	             (or waits in the process for a free slot)       CANCELLED (a cancel asked while it ran: see Cancel)
//	SUCCEEDED    done                                            —
//	FAILED       business or dispatch retries exhausted          SCHEDULED (Retry; a Trigger handed over
//	                                                             or in a caller's transaction),
//	                                                             DISPATCHING (a Trigger run here)
//	CANCELLED    cancelled, before it ran or while it ran        —
//	SKIPPED      skipped by OverlapSkip: its task key was held   —
//
// A scheduler that runs the tasks it claims (one process, or a leader that no other
// replica takes dispatches from) claims and starts them in one write, SCHEDULED →
// RUNNING with their execution records, fenced like every claim: as many as it has
// free handler slots plus a prefetch of four times what its handlers finish in one
// claim round trip (at most 200). A prefetched task waits in the process, RUNNING and
// heartbeated; at Stop it is released: SCHEDULED at once, its attempt unchanged.
// DISPATCHING is for tasks handed to another replica's executor, triggered, restricted
// by their task key (OverlapSkip, OverlapQueue), or without a handler here.
//
// # Time fields
//
// All times are UTC, are written by the store's clock or the scheduler's corrected
// clock (see "Scheduling, in brief"), and each has one meaning:
//
//	CreatedAt     the task was submitted (or, for an occurrence, materialised)
//	DueAt         when it should run; a business retry moves it to the retry's time;
//	              for an occurrence, its slot
//	DispatchedAt  the last claim: due, taken by a scheduler (SCHEDULED/FAILED → DISPATCHING,
//	              or SCHEDULED → RUNNING)
//	StartedAt     the last execution was recorded, before its handler ran (→ RUNNING;
//	              the same time as DispatchedAt when one write claimed and started it);
//	              StartedAt − DueAt is the lateness of the start in the store
//	HeartbeatAt   the running execution's last sign of life (every HeartbeatInterval)
//	FinishedAt    it reached SUCCEEDED, FAILED, CANCELLED or SKIPPED
//	TriggeredAt   the last manual Trigger (operator compensation)
//	UpdatedAt     the last change of the row
//
// Execution records (Executions) carry their own StartedAt, HeartbeatAt and
// FinishedAt per attempt.
//
// # Periodic tasks
//
// Cron and Every register schedules, before or after Start; they are stored in the store's
// schedules table (ax_schedules). A scheduler writes each occurrence as an ordinary
// task a couple of seconds before its slot — Name the schedule's name, Key the slot
// in RFC 3339 (UTC, e.g. "2026-11-29T10:02:00Z"), DueAt the slot, TaskKey the
// schedule's name — and advances the stored schedule in the same transaction, by a
// compare-and-set on its next slot, so that any number of schedulers sharing the
// store, restarting or racing, write each occurrence once. A task key is a
// mutual-exclusion key: the store's claim refuses to start a task while another with
// its key is DISPATCHING or RUNNING, and applies the overlap policy instead
// (OverlapSkip: SKIPPED with the reason; OverlapQueue: it waits; OverlapAllow: no
// exclusion). One-off tasks get the same rule with WithTaskKey. Slots missed while no
// scheduler ran follow the schedule's misfire policy. The README's "Periodic tasks"
// section has the details, time zones and DST included.
//
// # Guarantees
//
//   - Never early: a handler never starts before its task's DueAt. The scheduler keeps
//     due tasks in a hierarchical timing wheel (Config.Tick, default 10ms) read by its
//     monotonic clock corrected by the measured offset of the store's clock, which
//     hands a task out at its due time (in a tick of more than 64 tasks, at the tick's
//     end; every tick at its end for a minute after claims fell behind, as when every
//     core is busy), and the claim itself requires DueAt <= the store's current time.
//   - At-least-once handler calls, each attempt with its own execution id (a UUIDv7 in
//     Task.ExecutionID). The execution is recorded before the handler runs; a second
//     delivery of the same execution id runs nothing. A handler that is idempotent on
//     its execution id therefore runs each attempt's effect once.
//   - Crash recovery: the process can die at any point. Tasks due while it was down run
//     when a scheduler starts on the store again; a RUNNING task whose heartbeats stop
//     for Config.OrphanAfter is counted as a failed attempt and retried; a task claimed
//     but not started within Config.DispatchTimeout is handed back. A SUCCEEDED task
//     never runs again.
//   - Several schedulers may share a store. Without Config.Elector each runs the
//     whole scheduling loop (refill, claims, recovery, schedule firing) and they race
//     through conditional writes, so a due task is claimed by one of them and an
//     occurrence is written once. With an Elector only the leader of the Namespace
//     schedules, under its lease, and the store fences it: once a newer leader has
//     recorded itself (store.Store.RaiseFence), the old one's claims, schedule fires
//     and recovery writes, and the starts of what it claimed, on whichever replica,
//     are refused (store.ErrFenced) and its term ends. A process
//     that stalls past OrphanAfter and resumes can still finish an execution already
//     re-run by recovery; its result is discarded, its side effects are not — hence
//     handlers idempotent on the execution id or the business key.
//
// # Retries
//
// Two counters, never mixed. Business failures (the handler returned an error,
// panicked — the stack is kept in LastError —, passed its deadline, or was orphaned)
// grow Attempt, up to MaxRetry (default 5) retries with backoff DefaultBackoff
// (5s × 5^(n−1)), both overridable per handler and per task. Dispatch failures (no
// handler registered for the name on this node, the claim handed back) grow
// DispatchRetries up to Config.MaxDispatchRetries with a short backoff, and never
// consume a business retry. Exhausted → FAILED with the last error.
//
// Options given to Delay/At win over the handler's (Handle) defaults, which win over
// the package defaults. MaxRetry is resolved when the task is submitted and stored
// with it; a per-task backoff is evaluated at submit time and stored as a list of
// delays, so it holds on whichever node runs the retry.
//
// # Scheduling, in brief
//
// On Start the scheduler measures the offset between the store's clock and its own
// (the lowest-round-trip of five samples, taken at the midpoint; again every minute),
// so that Delay's DueAt and every due decision are in the store's time whatever the
// host's clock says. It then loads every SCHEDULED task
// due within Config.Window (overdue first) into its wheel, then refills every
// Config.RefillInterval with only the rows that changed since the last refill or
// entered the window. Tasks submitted through this Scheduler go into the wheel at
// once. One goroutine owns the wheel and never does I/O; claims (batches of up to 200,
// one conditional write each), executions, heartbeats and results run on their own
// goroutines and are written in batches, so the store calls per task fall as load
// rises. Under load, a write of results that would carry fewer than 100 waits for more
// for at most as long as the previous write took (5 ms at most): a task's outcome may
// be recorded that much later than its handler returned, never at the cost of a
// handler slot.
//
// # Lifecycle
//
// Handle, Cron and Every may be called before or after Start. Start measures the
// store's clock, stores the schedules and starts the loops; a Scheduler starts once
// (Start again, or after Stop, wraps ErrNotRunning). Stop stops claiming, hands back
// claimed tasks that have not started (a prefetched task waiting RUNNING for a slot
// becomes SCHEDULED, its attempt unchanged), and waits for the running handlers and
// their results, heartbeating them meanwhile so that no other scheduler takes them
// for orphans. When its context ends first it returns ctx.Err(): the handlers' contexts
// are cancelled, those that return within a second are released (they run again
// without using a retry), and whatever could not be written is left to recovery
// (see Scheduler.Stop).
// Stop on a stopped or never started scheduler returns nil. Each store call the
// scheduler makes on its own is bounded by Config.StoreTimeout. A task due under a
// name with no handler registered here is handed back as a dispatch failure, logged
// at WARN at most once a minute per name.
//
// # Transactions
//
// On a store that writes in transactions (every SQL store), a call given WithTx(tx)
// writes inside tx, so that "create the order" and "schedule its timeout" commit or
// roll back together. These rules hold for every such call:
//
//   - tx is a transaction the caller owns, or one of InTx's: a *sql.Tx on the store's
//     database for every SQL store, or a pgx.Tx on PostgreSQL.
//   - Any other tx, one on another database or schema, or a store that cannot join a
//     caller's transaction, is ErrInvalid, found before anything is written: tx stays
//     usable.
//   - Rolled back, what the call wrote never existed. Committed, it takes effect: a
//     task runs on time, and a task already due runs right after the commit.
//   - What the call changes on this scheduler (its wheel, a dispatch) happens after
//     InTx's commit, never before; for a caller's own transaction, whose commit the
//     scheduler cannot see, the next refill finds the change.
//   - Keep such transactions short: a claim of a task the transaction wrote waits for
//     it.
//
// InTx runs a function in a transaction of the store's own, for a tool without a
// database handle of its own (the admin API writes each change and its audit record
// so).
//
// # Errors and events
//
// Errors read "ax: <operation>: <cause>"; test them with errors.Is against ErrDuplicate,
// ErrNotFound, ErrInvalid, ErrNotCancellable, ErrNotTriggerable and ErrNotRunning, and
// use errors.As with *TaskStateError for the task that refused a Delay, At, Cancel or
// Trigger. Config.Observer receives the scheduler's events (Event) off the scheduling
// path, for metrics: package github.com/axsched/ax/metrics exports them to
// Prometheus.
//
// Every scheduler also writes the per-minute counts of its finished executions to the
// store (Config.ExecutionStatsInterval); Scheduler.Stats reads the whole namespace's
// from there, by outcome, with lateness percentiles, early starts and the names
// failing most, in one bounded query.
//
// # Tracing
//
// With Config.Tracer (package github.com/axsched/ax/tracing implements it on
// OpenTelemetry), the trace context of each call that submits tasks is stored with
// them (Task.Trace), and every execution runs in a span of its own, on whichever
// replica runs it: a child of the submitting call's span on the task's first attempt,
// a new trace linked to it on a retry and on a schedule's occurrence, whose trace is
// that of the Start that stored the schedule. Spans describe the task (name, id,
// attempt, execution id, lateness), never its payload. Without a Tracer nothing is
// stored and nothing is called.
package ax
