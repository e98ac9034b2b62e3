// Package redis is an elect.Elector backed by Redis (go-redis v9, any UniversalClient).
//
// # Keys and scripts
//
//	<prefix>leader:<ns>            "<token> <id> <candidate>", PX = TTL   the lease
//	{<prefix>leader:<ns>}:epoch    integer                               the token counter
//	{<prefix>leader:<ns>}:released channel                               release notifications
//
// Acquire is one Lua script: if the lease key is absent it raises the epoch to the elector's
// floor, INCRs it, and SETs the lease NX PX TTL with the new token in the value; otherwise it
// returns the holder's value and PTTL — unless that value is the campaign's own (an earlier
// attempt won but its reply was lost), which it PEXPIREs and returns as won. Renew (every
// TTL/3, retried every TTL/20 after an error) is compare-and-pexpire; Resign is
// compare-and-delete plus a PUBLISH on the release channel. <id> is random per Campaign, so
// two electors using one candidate name never renew or release each other's lease.
//
// # Standbys
//
// A candidate that finds the lease held waits until its PTTL runs out and tries at that
// moment — failover ≈ TTL — bounded by a fallback poll of min(5s, TTL/2); it subscribes to
// the release channel first, so a Resign wakes it at once (milliseconds, measured by the
// conformance suite's Release case).
//
// # Losing the lease
//
// The holder's deadline is the start of its last successful acquire or renew request + TTL −
// max(TTL/10, 5ms), on its monotonic clock; Redis starts its PX later, when the request
// arrives. If no renewal is confirmed by the deadline, Lease.Context is cancelled with
// elect.ErrLost by a timer, even while a renew request is still blocked. A renew whose
// compare fails (someone else holds the key, or the key is gone) ends the lease at once.
// Resign waits for the renewer to return, which a request blocked on a dead connection can
// delay up to the client's ReadTimeout unless Resign's ctx ends first.
//
// # Tokens and data loss
//
// Guaranteed: while Redis keeps the epoch key, every acquisition's token is greater than all
// earlier ones. Each Elector remembers the highest token it issued or saw (its own leases,
// Leader, and the holder and epoch reported by failed acquire attempts) and passes it as the
// floor, so after Redis loses data (restart without persistence, FLUSHDB, failover to a
// replica that missed writes) an Elector that has seen token N never acquires with a token
// ≤ N.
//
// Not guaranteed: an Elector that never saw N — a process started after the loss, or one
// that last looked before N was issued — may acquire with a token ≤ N after a loss; and until
// the old holder's next renewal fails (up to TTL/3) it still believes it leads, next to the
// new holder. Both gaps are closed by the store (DESIGN.md §7): the new leader's token is
// raised above the highest epoch the database recorded, and claims with a lower token are
// rejected. Tokens are exact up to 2^53 (Lua numbers are doubles).
package redis
