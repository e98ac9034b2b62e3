// Package elect is the leader-election seam of ax: an Elector chooses one leader among the
// replicas of a service, and the Lease it returns carries the fencing token.
//
// # Contract
//
//	candidate ──Campaign──▶ Lease{Token, Context}
//	                          │  renewed every TTL/3 (backend-specific)
//	                          ├─ Resign ─────────▶ Context done (ErrResigned), lease released
//	                          └─ renewal not confirmed by the deadline
//	                                             ▶ Context done (ErrLost), before the backend
//	                                               can have let anyone else in
//
// Every implementation passes the conformance suite in package electtest.
//
// # What the token guarantees
//
// Token is strictly greater than the token of every earlier holder of the same election, so
// anything that records the highest token it has seen (an executor, the store) can reject a
// stale leader. Tokens do not prove that their holder is still the leader: a leader frozen
// past its deadline (GC pause, SIGSTOP) resumes with an old token, and for a short time two
// processes may both believe they lead. That is why ax fences twice — executors reject a
// dispatch below the highest token they have seen, and the store rejects a claim below the
// epoch recorded by a newer leader (DESIGN.md §7). Election alone is not correctness.
//
// # The monotonic-clock rule
//
// A holder decides on its own monotonic clock (time.Now without wall-clock conversion) when
// its lease may have ended: deadline = start of the last successful acquire or renew request
// + TTL − a safety margin. The backend starts counting the TTL only after it received that
// request, so the backend's expiry is later than the deadline even if the request was slow;
// the margin covers the two clocks running at slightly different rates. When no renewal has
// been confirmed by the deadline, Lease.Context is cancelled — whatever the backend is doing,
// and even if a renew request is still in flight. Wall-clock jumps have no effect.
//
// # Data loss in the backend
//
// A backend that loses its state (a Redis restart without persistence, a failover to a
// replica that had not received the last writes) could hand out a token again. Each backend
// package documents how far it closes that gap on its own; the rest is closed by the store,
// which raises every new leader's token above the highest epoch it has recorded.
package elect
