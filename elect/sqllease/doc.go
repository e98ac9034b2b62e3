// Package sqllease is an elect.Elector on ax's own store: PostgreSQL, MySQL/MariaDB, SQLite
// or the in-memory store (every store is a store.Leaser). It gives the
// guarantees of elect/redis without a second service: the database ax already trusts is
// the source of truth for who leads.
//
// # The lease row
//
//	ax_leader
//	  namespace  PRIMARY KEY   one row per election (WithNamespace)
//	  holder     "<id> <candidate>"; <id> is random per Campaign
//	  epoch      the fencing token: +1 per acquire, kept by a release
//	  expires_at database time; <= now: expired or released
//	  updated_at database time
//
// Acquire is one conditional write in the database's clock — "take it if expires_at <= now
// or there is no row, and raise the epoch in the same statement" (PostgreSQL: one UPSERT …
// WHERE expires_at <= now RETURNING; MySQL/MariaDB: a transaction around SELECT … FOR
// UPDATE; SQLite: one UPSERT in its single writer). Renew (every TTL/3, retried every
// TTL/20 after an error) and release are UPDATEs conditioned on holder and epoch. So the
// epoch never decreases and is never reused, and the holders' clocks decide nothing in the
// database.
//
// # Standbys
//
// A standby does not poll blindly: a refused acquire reports the holder's remaining time
// (expires_at − now, in the database's clock), and the standby tries again at that moment,
// at most after the fallback poll (WithPollInterval, by default min(5s, TTL/2)) — failover
// ≈ TTL. A Resign through the same Elector wakes its own waiting campaigns at once. Other
// processes cannot hear a release in the database; the ax scheduler that resigns tells the
// other replicas' schedulers over their executor endpoints (a signed release notice), and
// they campaign at once, so a graceful stop hands over in milliseconds. A replica not told
// (no executor endpoint, the notice lost) tries at its next attempt, within the poll.
//
// # Losing the lease
//
// The holder's deadline is the start of its last successful acquire or renew request + TTL
// − max(TTL/10, 5ms), on its monotonic clock; the database starts counting the TTL later,
// when the statement runs. If no renewal is confirmed by the deadline, Lease.Context is
// cancelled with elect.ErrLost by a timer, even while a renew call is still blocked (the
// call's context ends at the deadline too). A renew whose condition fails (another holder,
// another epoch, or an expired row) ends the lease at once.
//
// # Tokens and data loss
//
// The database is the source of truth, and it is the same database whose claims the tokens
// fence: there is no second copy of the epoch that could be lost on its own. A restore from
// an older backup rolls the epoch back together with the tasks it fences.
package sqllease
