// Package remote is ax's executor protocol: the elected leader dispatches claimed tasks
// to executors on other replicas over HTTP/JSON, and every dispatch request is signed
// with the cluster secret and verified before the executor reads it. Server is the
// executor's endpoint (a replica serves it through ax.Scheduler.ExecutorHandler);
// Client is the leader's side; Signer and Verifier are the authentication under both.
//
// A dispatch (POST DispatchPath, a DispatchRequest) names its namespace, its target
// node and the leader's fencing token, and carries the tasks, each DISPATCHING with its
// execution id. The executor refuses a token below the highest it has seen (409, a
// FencedError to the client) and marks the older token's tasks not yet started as no
// longer valid; it answers each task accepted, busy (no free slot) or unhandled (no
// handler here), with its load. An accepted task is recorded and started by the
// executor, in the store, exactly as in-process execution does: a duplicate delivery of
// an execution id runs nothing.
//
// A release notice (POST ReleasedPath, a ReleasedNotice, signed the same way) tells a
// replica that the leader under its token released its lease — a graceful stop — so
// that a standby campaigns at once rather than at its elector's next attempt: a handover
// in milliseconds whatever the elector. A notice of a token below the highest seen is
// ignored; it can wake a campaign, never grant anything (the elector decides).
//
//	leader                                   executor
//	Signer.Sign(req, body, token, now) ──▶   Verifier.Middleware ──▶ dispatch handler
//	                                          │ 401 unsigned, forged, stale, replayed
//	                                          │ 413 body over the bound
//	                                          └ 503 nonce cache full
//
// # Headers
//
// A signed request carries four headers, each exactly once:
//
//	Ax-Timestamp  signing time, Unix milliseconds, decimal           1767225600000
//	Ax-Nonce      128 random bits, 32 lowercase hex digits, per request
//	Ax-Token      the leader's fencing token, positive decimal int64  42
//	Ax-Signature  HMAC-SHA256(secret, canonical string), 64 lowercase hex digits
//
// # Canonical string
//
// The signature is the HMAC-SHA256, keyed with the cluster secret, of these six fields
// joined by "\n" (a single line feed, no trailing one):
//
//	method        "POST", as sent ("GET" for an empty http.Request.Method)
//	path          URL.EscapedPath() ("/" if empty), then "?" and URL.RawQuery if there is a query
//	timestamp     the Ax-Timestamp value
//	nonce         the Ax-Nonce value
//	token         the Ax-Token value
//	body hash     hex(SHA-256(body)), lowercase; for an empty body e3b0c442…b855
//
// For example, a POST of {"id":1} to /ax/v1/dispatch:
//
//	POST\n/ax/v1/dispatch\n1767225600000\n00112233445566778899aabbccddeeff\n42\n<hex sha256 of {"id":1}>
//
// The nonce and token are signed so that neither can be swapped onto another request.
// The verifier accepts each of these values only in the canonical form above (no sign,
// no leading zeros, exact digit counts), so one signature has one reading.
//
// # What the verifier refuses
//
// Verifier.Verify refuses, in this order: a missing header (ErrUnsigned); a malformed
// or repeated header, or one not in its canonical form — uppercase hex included —
// (ErrBadSignature); a timestamp more than the window (DefaultWindow, 30 s) behind or
// ahead of its clock (ErrStale); a signature that does not match (ErrBadSignature); a
// timestamp out of the window once the body is read (ErrStale again: a body sent
// slowly cannot outlast its nonce); a nonce it has accepted before (ErrReplayed). The
// checks before the signature need no body, and Middleware runs them before it reads
// one. Signatures are compared in constant time (hmac.Equal). Middleware answers each
// refusal 401 with the sentinel's text and logs it at WARN with the detail; it never
// logs the signature or the body. Refusals, the Verifier's and the Server's, are
// logged at most one line a minute per client address, each with the count of those
// not logged since the line before.
//
// # Nonce cache
//
// Together, the window and the nonce cache make a request good once. A replay inside
// the window is refused because its nonce is remembered; a replay after it is refused
// as stale. A nonce is remembered until its request's timestamp plus the window plus a
// margin of 5 s (for a wall clock stepped back a little), then evicted, earliest expiry
// first. Memory is bounded: the cache holds at most WithNonceCapacity nonces
// (DefaultNonceCapacity, 262,144, about 20 MiB). When it is full of unexpired nonces the
// verifier does not forget one, which would let that request be replayed: it refuses
// new requests with ErrNonceCacheFull, answered 503 with Retry-After, until nonces
// expire. Only requests with a good signature reach the cache, so filling it needs the
// secret. The cache lives in one process: a restarted executor forgets its nonces, so a
// request captured within the last window could be replayed to it once.
//
// # Scope
//
// The signature covers neither the Host header nor the other headers: a request signed
// for one executor verifies at another that shares the secret, once per executor,
// within the window. So the dispatch body names its target executor, and the Server
// refuses work addressed to another (421). The token is authenticated, not judged:
// the executor compares it with the highest token it has seen to refuse a stale
// leader.
//
// # Bounded work
//
// See MaxInFlight and MaxDispatchTasks. A dispatch body is JSON with each member once
// and in the protocol's case, else 400; a member the protocol does not know is
// ignored, so that a newer leader may add one. A task with an id that is not positive
// or repeated, or an empty, overlong or NUL-holding name or execution id, makes the
// whole dispatch 400.
//
// # Listening
//
// Without a cluster secret the executor endpoint serves only on loopback: ListenGuard
// refuses any other address with ErrInsecureListen. The token then comes from the
// unsigned Ax-Token header, and one above the highest seen is taken only if it is not
// above the epoch the store recorded (Executor.Epoch, read at most once a second):
// else 403 ErrUnverifiedToken, and nothing changes. So no unsigned request can make
// the executor refuse the real leader. The health endpoint, /ax/v1/health, is
// unsigned and served apart from dispatch, outside Middleware and any queue of tasks,
// so a busy executor still answers it.
package remote
