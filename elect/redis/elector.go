package redis

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/axsched/ax/elect"
	"github.com/axsched/ax/elect/internal/held"
)

// Elector is an elect.Elector backed by Redis. Create it with New; it is safe for concurrent
// use and starts no goroutine of its own (each held Lease runs one renewer until it ends).
type Elector struct {
	client    goredis.UniversalClient
	keys      []string // lease key, epoch key
	channel   string   // release notifications
	ttlMS     int64
	namespace string
	timing    held.Timing
	poll      time.Duration
	log       *slog.Logger

	// floor is the highest token this Elector has issued or seen; its next token exceeds it
	// even if Redis lost the epoch key.
	floor atomic.Int64
}

var _ elect.Elector = (*Elector)(nil)

// minWait is the shortest pause between two acquire attempts.
const minWait = 2 * time.Millisecond

// New returns an Elector of the election named by WithNamespace, with its lease at key
// <prefix>leader:<namespace> and its epoch at {<prefix>leader:<namespace>}:epoch (one hash
// slot, so Redis Cluster works; prefix and namespace must not contain braces then). It
// panics if an option is invalid (a TTL below MinTTL, an empty namespace).
func New(client goredis.UniversalClient, opts ...Option) *Elector {
	c := config{prefix: DefaultKeyPrefix, namespace: DefaultNamespace, ttl: DefaultTTL}
	for _, o := range opts {
		o(&c)
	}
	if err := c.validate(); err != nil {
		panic(err)
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	key := c.prefix + "leader:" + c.namespace
	e := &Elector{
		client:    client,
		keys:      []string{key, "{" + key + "}:epoch"},
		channel:   "{" + key + "}:released",
		ttlMS:     c.ttl.Milliseconds(),
		namespace: c.namespace,
		timing:    held.NewTiming(c.ttl),
		poll:      min(MaxPollInterval, c.ttl/2),
		log:       c.logger.With("namespace", c.namespace),
	}
	return e
}

// Namespace returns the election's name (WithNamespace).
func (e *Elector) Namespace() string { return e.namespace }

// observe raises the token floor to tok.
func (e *Elector) observe(tok int64) {
	for {
		cur := e.floor.Load()
		if tok <= cur || e.floor.CompareAndSwap(cur, tok) {
			return
		}
	}
}

// parseValue splits a lease value "<token> <id> <candidate>".
func parseValue(v string) (tok int64, candidate string, err error) {
	parts := strings.SplitN(v, " ", 3)
	if len(parts) != 3 {
		return 0, "", fmt.Errorf("ax: redis elector: malformed lease value %q", v)
	}
	tok, err = strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("ax: redis elector: malformed lease value %q", v)
	}
	return tok, parts[2], nil
}

// Leader reports the current holder. It raises this Elector's token floor to the holder's
// token.
func (e *Elector) Leader(ctx context.Context) (elect.State, error) {
	res, err := leaderScript.Run(ctx, e.client, e.keys[:1]).Slice()
	if err != nil {
		return elect.State{}, fmt.Errorf("ax: redis elector: read leader: %w", err)
	}
	v, _ := res[0].(string)
	pttl, _ := res[1].(int64)
	if v == "" {
		return elect.State{}, nil
	}
	tok, cand, err := parseValue(v)
	if err != nil {
		return elect.State{}, err
	}
	e.observe(tok)
	return elect.State{Holder: cand, Token: tok, Remaining: time.Duration(max(pttl, 0)) * time.Millisecond}, nil
}

// Campaign blocks until candidate holds the lease or ctx ends. Between attempts it waits
// until the current lease's PTTL runs out, at most the fallback poll (min(5s, TTL/2)), and
// wakes early when the holder resigns (a PUBLISH from the release script). An attempt
// that wins returns the lease even if ctx ended while it was under way.
func (e *Elector) Campaign(ctx context.Context, candidate string) (elect.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Subscribe before the first attempt, so that a release after a failed attempt is heard.
	var released <-chan *goredis.Message
	ps := e.client.Subscribe(ctx, e.channel)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		e.log.WarnContext(ctx, "ax: redis elector: subscribe to releases failed; polling", "candidate", candidate, "err", err)
	} else {
		// One buffered message is a pending wake-up, all a waiting campaign needs: drop any
		// further one at once rather than keep go-redis's receiving goroutine blocked on the
		// full channel (by default for a minute) after Campaign has returned.
		released = ps.Channel(goredis.WithChannelSize(1), goredis.WithChannelSendTimeout(time.Millisecond))
	}

	id := held.CampaignID()
	for {
		start := time.Now()
		actx, cancel := held.AcquireContext(ctx, e.timing.TTL)
		res, err := acquireScript.Run(actx, e.client, e.keys, id+" "+candidate, e.ttlMS, e.floor.Load()).Slice()
		cancel()
		if err == nil && len(res) >= 3 && res[0] == int64(1) {
			// Won, even if ctx ended during the request: ctx bounds the wait only, and a
			// lease left unrenewed in Redis would stall the election for a TTL.
			tok, _ := res[1].(int64)
			val, _ := res[2].(string)
			e.observe(tok)
			return e.newLease(ctx, candidate, tok, val, start), nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		wait := e.poll
		switch {
		case err != nil:
			e.log.WarnContext(ctx, "ax: redis elector: acquire failed", "candidate", candidate, "err", err)
		case len(res) == 4:
			if pttl, _ := res[1].(int64); pttl >= 0 {
				wait = min(wait, time.Duration(pttl)*time.Millisecond)
			}
			if v, _ := res[2].(string); v != "" {
				if tok, _, err := parseValue(v); err == nil {
					e.observe(tok)
				}
			}
			if s, _ := res[3].(string); s != "" {
				if tok, err := strconv.ParseInt(s, 10, 64); err == nil {
					e.observe(tok)
				}
			}
		default:
			return nil, fmt.Errorf("ax: redis elector: acquire: unexpected reply %v", res)
		}
		closed, err := held.Pause(ctx, max(wait, minWait), released)
		if err != nil {
			return nil, err
		}
		if closed {
			released = nil // no more releases to hear: poll
		}
	}
}

// newLease keeps the lease won by a request that started at start.
func (e *Elector) newLease(ctx context.Context, candidate string, tok int64, val string, start time.Time) elect.Lease {
	return held.Start(ctx, "redis elector", e.log, e.timing, held.Backend{
		Renew: func(ctx context.Context) (bool, error) {
			n, err := renewScript.Run(ctx, e.client, e.keys[:1], val, e.ttlMS).Int64()
			return n == 1, err
		},
		Release: func(ctx context.Context) (bool, error) {
			n, err := releaseScript.Run(ctx, e.client, e.keys[:1], val, e.channel).Int64()
			return n != 0, err
		},
	}, candidate, val, tok, start)
}
