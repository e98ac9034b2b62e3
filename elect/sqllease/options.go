package sqllease

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/axsched/ax/store"
)

const (
	// DefaultNamespace is the election's name when WithNamespace is not given.
	DefaultNamespace = "default"
	// DefaultTTL is the lease's time to live.
	DefaultTTL = 10 * time.Second
	// MinTTL is the shortest TTL New accepts. Every SQL store keeps expires_at to the
	// microsecond, so the TTL is exact to 1µs.
	MinTTL = 100 * time.Millisecond
	// MaxPollInterval is the default bound on how long a standby waits between two
	// acquire attempts (WithPollInterval); the default is also at most TTL/2.
	MaxPollInterval = 5 * time.Second
)

// Option configures an Elector.
type Option func(*config)

type config struct {
	namespace string
	ttl       time.Duration
	poll      time.Duration
	logger    *slog.Logger
}

// WithNamespace names the election (the namespace column of ax_leader); electors of
// different namespaces do not compete. Defaults to DefaultNamespace.
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithTTL sets the lease's time to live; the holder renews every TTL/3. Defaults to
// DefaultTTL; New refuses a TTL below MinTTL.
func WithTTL(ttl time.Duration) Option { return func(c *config) { c.ttl = ttl } }

// WithPollInterval bounds how long a standby waits between two acquire attempts: it
// tries when the holder's lease would expire, or after d if that is sooner. Defaults to
// min(MaxPollInterval, TTL/2). A longer bound means fewer reads of the lease row while
// a holder renews; it does not slow a failover (the standby tries at the expiry it was
// told) nor a handover (a Resign wakes this Elector's campaigns, and ax tells the other
// replicas' schedulers at once). A shorter one costs more than a read: on PostgreSQL each
// attempt takes the namespace's fence lock exclusively for a moment, holding back the
// leader's fenced writes (claims, starts) meanwhile; keep it to seconds.
func WithPollInterval(d time.Duration) Option { return func(c *config) { c.poll = d } }

// WithLogger sets the logger for renew failures and lost leases. Defaults to slog.Default().
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

func (c *config) validate() error {
	if c.ttl < MinTTL {
		return fmt.Errorf("ax: sql lease: TTL %v below the minimum %v: %w", c.ttl, MinTTL, store.ErrInvalid)
	}
	if c.poll < 0 || (c.poll > 0 && c.poll < minWait) {
		return fmt.Errorf("ax: sql lease: poll interval %v below %v: %w", c.poll, minWait, store.ErrInvalid)
	}
	if c.namespace == "" {
		return fmt.Errorf("ax: sql lease: empty namespace: %w", store.ErrInvalid)
	}
	return nil
}
