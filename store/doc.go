// Package store is the seam between the ax scheduler and the database that holds its
// state. It defines the row types, the sentinel errors and the [Store] interface that
// every driver (store/sqlite, store/memory, …) implements; it imports nothing of ax's,
// so the scheduler and the drivers never import each other.
//
// Store is composed of roles, each a small interface that one part of the scheduler
// calls: [TaskWriter] and [TaskReader] for callers, [Queue] for the kernel's path,
// [ScheduleKeeper] and [SlotHistory] for periodic tasks, [Fencer] and [Leaser] for
// leaders, [NodeRegistry], [Auditor], [StatsKeeper] and [Pruner]. A driver implements
// them all; [Transactor], [Notifier] and [Marker] are optional.
//
// The interface is documented as a contract and checked by the conformance suite in
// store/storetest: a driver written from this package's documentation that passes
// storetest.Run is a store ax can use. It is meant for driver authors: applications
// use package ax, which re-exports the types they need.
//
// # State machine
//
//	           Claim / Trigger            Start                Finish(ok)
//	SCHEDULED ───────────────► DISPATCHING ─────► RUNNING ─────────────► SUCCEEDED
//	  │  ▲  ▲                      │                │ │
//	  │  │  └──── Requeue ─────────┘                │ └── Finish(retry) ──► SCHEDULED
//	  │  └──────── (dispatch retry)                 └──── Finish(fail) ───► FAILED
//	  └── Cancel ──► CANCELLED ◄── Cancel (DISPATCHING), Finish (RUNNING, cancel asked)
//	                                                           FAILED ── Trigger ──► DISPATCHING
//	                                              SCHEDULED, FAILED ── MakeDue ──► SCHEDULED (due now)
//
// Every arrow is one conditional write (UPDATE … WHERE id = ? AND status = old
// [AND execution_id = ?]); a write whose condition no longer holds changes nothing and
// is reported as not applied. Batched methods sort ids ascending and touch at most
// [MaxBatch] rows per statement.
//
// # Namespaces
//
// A store can keep several namespaces apart on one database, so that services sharing
// it have separate tasks, schedules, nodes and audit logs. A store as opened is the
// view of DefaultNamespace; [Store.InNamespace] returns the view of another.
//
// Every method of a view reads and writes only the view's rows, except those that name
// their namespace explicitly: the Leaser's, the Fencer's, and the Fence the
// transitions check, so leaders are separate too. Another namespace's row is as good
// as missing: its id is ErrNotFound, or left out of a batch's result (Lost for Start,
// false for the others). An execution id is recorded once across namespaces, and
// another namespace's execution is not a Duplicate to Start: it is Lost. The business
// key is unique per namespace: (namespace, name, key). A view shares the store's
// connections and its Close: closing one closes all.
//
// # Transactions
//
// A [Transactor] lets a caller's writes commit or roll back with its own: "create the
// order" and "schedule its timeout" together (ax.WithTx). It binds a transaction once,
// with Bind (the caller's) or InTx (the store's own), and the [Tx] it returns has the
// store's method names. These rules hold for every Tx:
//
//   - What a Tx writes becomes visible if, and only if, the transaction commits; until
//     then, a claim of a row it changed waits for the transaction.
//   - A Tx neither commits nor rolls back. If one of its methods fails, the
//     transaction may be aborted (PostgreSQL): roll it back.
//   - Bind refuses a transaction of another kind, database or schema with ErrInvalid,
//     before anything is written.
//   - In InTx, fn must not commit or roll back, nor write through the store's other
//     methods meanwhile: SQLite's one writer is held by the transaction.
//   - InTx may call fn again, in a new transaction, when the store retries a transient
//     failure (a deadlock on MySQL), so fn must do nothing it could not repeat.
//   - fn must not run or wait for another InTx of the store: a store may bound how
//     many are open at once (PostgreSQL and MySQL: half the pool), or have one writer
//     (SQLite).
package store
