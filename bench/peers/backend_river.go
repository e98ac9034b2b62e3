package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// noopArgs are the arguments of the River bench job: the task's key.
type noopArgs struct {
	Key int `json:"k"`
}

// Kind is the job kind River stores.
func (noopArgs) Kind() string { return "bench_noop" }

// noopWorker is the River worker: it reports the key to its handler.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	h handlerFunc
}

// Work calls the handler.
func (w *noopWorker) Work(_ context.Context, job *river.Job[noopArgs]) error {
	w.h(job.Args.Key)
	return nil
}

// riverInstance is River on a pgx v5 pool in a fresh, migrated schema.
type riverInstance struct {
	tuned   bool
	schema  string
	pool    *pgxpool.Pool
	drop    func()
	worker  *noopWorker
	inserts *river.Client[pgx.Tx] // insert-only client
	running *river.Client[pgx.Tx]
}

func openRiver(ctx context.Context, cfg config, tuned bool) (instance, error) {
	schema, dsn, drop, err := freshSchema(ctx, cfg.PG)
	if err != nil {
		return nil, err
	}
	pool, err := openPool(ctx, dsn)
	if err != nil {
		drop()
		return nil, err
	}
	fail := func(err error) (instance, error) {
		pool.Close()
		drop()
		return nil, err
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema, Logger: quietLogger()})
	if err != nil {
		return fail(fmt.Errorf("river: migrator: %w", err))
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fail(fmt.Errorf("river: migrate: %w", err))
	}
	r := &riverInstance{tuned: tuned, schema: schema, pool: pool, drop: drop, worker: &noopWorker{}}
	if r.inserts, err = river.NewClient(riverpgxv5.New(pool), r.config(0)); err != nil {
		return fail(fmt.Errorf("river: insert client: %w", err))
	}
	return r, nil
}

// config is the client's configuration: River's defaults, or the tuned fetch
// timings; concurrency 0 makes an insert-only client.
func (r *riverInstance) config(concurrency int) *river.Config {
	workers := river.NewWorkers()
	river.AddWorker(workers, r.worker)
	c := &river.Config{Schema: r.schema, Logger: quietLogger(), Workers: workers}
	if concurrency > 0 {
		c.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: concurrency}}
	}
	if r.tuned {
		c.FetchCooldown = 5 * time.Millisecond
		c.FetchPollInterval = 50 * time.Millisecond
	}
	return c
}

func (r *riverInstance) EnqueueOne(ctx context.Context, key int, due time.Time) error {
	if _, err := r.inserts.Insert(ctx, noopArgs{Key: key}, &river.InsertOpts{ScheduledAt: due}); err != nil {
		return fmt.Errorf("river: Insert: %w", err)
	}
	return nil
}

func params(keys []int, dues []time.Time) []river.InsertManyParams {
	ps := make([]river.InsertManyParams, len(keys))
	for i, k := range keys {
		ps[i] = river.InsertManyParams{Args: noopArgs{Key: k}}
		if !dues[i].IsZero() {
			ps[i].InsertOpts = &river.InsertOpts{ScheduledAt: dues[i]}
		}
	}
	return ps
}

func (r *riverInstance) EnqueueBatch(ctx context.Context, keys []int, dues []time.Time) error {
	if _, err := r.inserts.InsertMany(ctx, params(keys, dues)); err != nil {
		return fmt.Errorf("river: InsertMany: %w", err)
	}
	return nil
}

// EnqueueBatchFast inserts with InsertManyFast (COPY FROM).
func (r *riverInstance) EnqueueBatchFast(ctx context.Context, keys []int, dues []time.Time) error {
	if _, err := r.inserts.InsertManyFast(ctx, params(keys, dues)); err != nil {
		return fmt.Errorf("river: InsertManyFast: %w", err)
	}
	return nil
}

// Preload inserts with InsertManyFast in batches of 1,000; a zero due time leaves
// ScheduledAt unset (available at once).
func (r *riverInstance) Preload(ctx context.Context, dues []time.Time) error {
	for i := 0; i < len(dues); i += 1000 {
		end := min(len(dues), i+1000)
		keys := make([]int, 0, end-i)
		for j := i; j < end; j++ {
			keys = append(keys, j)
		}
		if err := r.EnqueueBatchFast(ctx, keys, dues[i:end]); err != nil {
			return err
		}
	}
	return nil
}

func (r *riverInstance) Start(ctx context.Context, concurrency int, h handlerFunc) error {
	r.worker.h = h
	c, err := river.NewClient(riverpgxv5.New(r.pool), r.config(concurrency))
	if err != nil {
		return fmt.Errorf("river: client: %w", err)
	}
	if err := c.Start(ctx); err != nil {
		return fmt.Errorf("river: start: %w", err)
	}
	r.running = c
	return nil
}

func (r *riverInstance) Counts(ctx context.Context) (storeCounts, error) {
	var c storeCounts
	err := r.pool.QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE state = 'completed'),
		count(*) FILTER (WHERE state = 'scheduled'),
		count(*)
		FROM river_job`).Scan(&c.Completed, &c.Waiting, &c.Total)
	if err != nil {
		return c, fmt.Errorf("river: count jobs: %w", err)
	}
	return c, nil
}

func (r *riverInstance) Stop(ctx context.Context) error {
	if r.running == nil {
		return nil
	}
	c := r.running
	r.running = nil
	if err := c.Stop(ctx); err != nil {
		return fmt.Errorf("river: stop: %w", err)
	}
	return nil
}

func (r *riverInstance) Close() error {
	r.pool.Close()
	r.drop()
	return nil
}

// Settle runs VACUUM ANALYZE on the schema's tables.
func (r *riverInstance) Settle(ctx context.Context) error { return vacuumSchema(ctx, r.pool) }
