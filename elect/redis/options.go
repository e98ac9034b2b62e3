package redis

import (
	"fmt"
	"log/slog"
	"time"
)

const (
	// DefaultKeyPrefix is the prefix of every key the Elector uses.
	DefaultKeyPrefix = "ax:"
	// DefaultNamespace is the election's name when WithNamespace is not given.
	DefaultNamespace = "default"
	// DefaultTTL is the lease's time to live.
	DefaultTTL = 10 * time.Second
	// MinTTL is the shortest TTL New accepts.
	MinTTL = 100 * time.Millisecond
	// MaxPollInterval bounds how long a standby waits between two acquire attempts when it
	// hears no release; the bound is also at most TTL/2.
	MaxPollInterval = 5 * time.Second
)

// Option configures an Elector.
type Option func(*config)

type config struct {
	prefix    string
	namespace string
	ttl       time.Duration
	logger    *slog.Logger
}

// WithKeyPrefix sets the prefix of every key and channel. Defaults to DefaultKeyPrefix.
func WithKeyPrefix(prefix string) Option { return func(c *config) { c.prefix = prefix } }

// WithNamespace names the election; electors of different namespaces do not compete.
// Defaults to DefaultNamespace.
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithTTL sets the lease's time to live; the holder renews every TTL/3. Defaults to
// DefaultTTL; New panics below MinTTL. Redis counts it in whole milliseconds.
func WithTTL(ttl time.Duration) Option { return func(c *config) { c.ttl = ttl } }

// WithLogger sets the logger for renew failures and lost leases. Defaults to slog.Default().
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

func (c *config) validate() error {
	if c.ttl < MinTTL {
		return fmt.Errorf("ax: redis elector: TTL %v below the minimum %v", c.ttl, MinTTL)
	}
	if c.namespace == "" {
		return fmt.Errorf("ax: redis elector: empty namespace")
	}
	return nil
}
