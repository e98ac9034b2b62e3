package remote

import "errors"

// Errors of the remote protocol. Test them with errors.Is; the errors this package
// returns read "ax: remote: <operation or sentinel>: <detail>".
var (
	// ErrNoSecret: the cluster secret is empty.
	ErrNoSecret = errors.New("no cluster secret")
	// ErrWeakSecret: the cluster secret is shorter than MinSecretLen bytes.
	ErrWeakSecret = errors.New("cluster secret too short")
	// ErrUnsigned: the request lacks one or more of the Ax-* headers.
	ErrUnsigned = errors.New("unsigned request")
	// ErrBadSignature: a header is malformed or repeated, or the signature does not
	// match the request (forged, tampered with, or signed with another secret).
	ErrBadSignature = errors.New("bad signature")
	// ErrStale: the request's timestamp is further than the window from the verifier's
	// clock, behind or ahead.
	ErrStale = errors.New("stale request")
	// ErrReplayed: the verifier accepted a request with this nonce before, within the
	// window.
	ErrReplayed = errors.New("replayed request")
	// ErrNonceCacheFull: the verifier remembers as many unexpired nonces as its
	// capacity allows, so it refuses new requests until some expire rather than forget
	// one and let its replay through. The middleware answers 503.
	ErrNonceCacheFull = errors.New("nonce cache full")
	// ErrInsecureListen: ListenGuard refused an address that is not loopback because
	// there is no cluster secret.
	ErrInsecureListen = errors.New("refusing to serve without a cluster secret on a non-loopback address")
	// ErrFenced: the executor has seen a higher fencing token than the dispatch's: a
	// newer leader exists, and the executor starts nothing for this one.
	ErrFenced = errors.New("fenced: the executor has seen a newer leader")
	// ErrUnreachable: the executor could not be reached, did not answer in time, or
	// answered what cannot be read: whether it took the request is not known.
	ErrUnreachable = errors.New("executor unreachable")
	// ErrTooLarge: the executor refused the request's body as larger than its limit
	// (413); the same tasks in smaller requests may pass.
	ErrTooLarge = errors.New("request body too large")
	// ErrBusy: the executor answered 503 — it serves as many requests as it allows at
	// once (MaxInFlight), its nonce cache is full, or, without a secret, it cannot read
	// the store's epoch: it took none of the tasks, and may in a moment.
	ErrBusy = errors.New("executor busy")
	// ErrUnverifiedToken: without a cluster secret, a dispatch's token is above both the
	// highest the executor has seen and the epoch the store recorded: nothing vouches
	// for it, so the executor refuses it rather than let it fence out the leader.
	ErrUnverifiedToken = errors.New("unsigned token above the store's recorded epoch")
)
