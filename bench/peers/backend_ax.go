package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/postgres"
)

const axTaskName = "bench.noop"

// axInstance is ax on the PostgreSQL store in a fresh schema, with its defaults.
type axInstance struct {
	st        *postgres.Store
	pool      *pgxpool.Pool // for reading the record
	drop      func()
	submitter *ax.Scheduler // not started: submits only
	running   *ax.Scheduler
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openAx(ctx context.Context, cfg config) (instance, error) {
	_, dsn, drop, err := freshSchema(ctx, cfg.PG)
	if err != nil {
		return nil, err
	}
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		drop()
		return nil, fmt.Errorf("ax: open store: %w", err)
	}
	pool, err := openPool(ctx, dsn)
	if err != nil {
		st.Close()
		drop()
		return nil, err
	}
	sub, err := ax.New(ax.Config{Store: st, Logger: quietLogger(), OwnerService: "ax-peers"})
	if err != nil {
		pool.Close()
		st.Close()
		drop()
		return nil, fmt.Errorf("ax: new scheduler: %w", err)
	}
	return &axInstance{st: st, pool: pool, drop: drop, submitter: sub}, nil
}

func (a *axInstance) EnqueueOne(ctx context.Context, key int, due time.Time) error {
	if _, err := a.submitter.At(ctx, axTaskName, strconv.Itoa(key), due); err != nil {
		return fmt.Errorf("ax: At: %w", err)
	}
	return nil
}

func (a *axInstance) EnqueueBatch(ctx context.Context, keys []int, dues []time.Time) error {
	specs := make([]ax.TaskSpec, len(keys))
	for i, k := range keys {
		specs[i] = ax.TaskSpec{Name: axTaskName, Key: strconv.Itoa(k), DueAt: dues[i]}
	}
	if _, err := a.submitter.SubmitMany(ctx, specs); err != nil {
		return fmt.Errorf("ax: SubmitMany: %w", err)
	}
	return nil
}

// Preload writes straight to the store in batches of 1,000, as ax bench does.
func (a *axInstance) Preload(ctx context.Context, dues []time.Time) error {
	now := time.Now()
	for i := 0; i < len(dues); i += 1000 {
		batch := make([]store.NewTask, 0, 1000)
		for j := i; j < min(len(dues), i+1000); j++ {
			due := dues[j]
			if due.IsZero() {
				due = now
			}
			batch = append(batch, store.NewTask{Name: axTaskName, Key: strconv.Itoa(j), DueAt: due.UTC(), MaxRetry: ax.DefaultMaxRetry})
		}
		if _, err := a.st.Insert(ctx, batch); err != nil {
			return fmt.Errorf("ax: store insert: %w", err)
		}
	}
	return nil
}

func (a *axInstance) Start(ctx context.Context, concurrency int, h handlerFunc) error {
	s, err := ax.New(ax.Config{Store: a.st, Logger: quietLogger(), OwnerService: "ax-peers", Concurrency: concurrency})
	if err != nil {
		return fmt.Errorf("ax: new scheduler: %w", err)
	}
	s.HandleFunc(axTaskName, func(_ context.Context, t *ax.Task) error {
		k, err := strconv.Atoi(t.Key)
		if err != nil {
			k = -1
		}
		h(k)
		return nil
	})
	if err := s.Start(ctx); err != nil {
		return fmt.Errorf("ax: start: %w", err)
	}
	a.running = s
	return nil
}

func (a *axInstance) Counts(ctx context.Context) (storeCounts, error) {
	var c storeCounts
	err := a.pool.QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE status = 'SUCCEEDED'),
		count(*) FILTER (WHERE status = 'SCHEDULED'),
		count(*)
		FROM ax_tasks`).Scan(&c.Completed, &c.Waiting, &c.Total)
	if err != nil {
		return c, fmt.Errorf("ax: count tasks: %w", err)
	}
	return c, nil
}

func (a *axInstance) Stop(ctx context.Context) error {
	if a.running == nil {
		return nil
	}
	s := a.running
	a.running = nil
	if err := s.Stop(ctx); err != nil {
		return fmt.Errorf("ax: stop: %w", err)
	}
	return nil
}

func (a *axInstance) Close() error {
	a.pool.Close()
	err := a.st.Close()
	a.drop()
	if err != nil {
		return fmt.Errorf("ax: close store: %w", err)
	}
	return nil
}

// Settle runs VACUUM ANALYZE on the schema's tables.
func (a *axInstance) Settle(ctx context.Context) error { return vacuumSchema(ctx, a.pool) }
