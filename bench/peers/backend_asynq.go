package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

const asynqTaskType = "bench:noop"

// enqueuers is how many goroutines submit an asynq "batch": asynq has no batch API.
const enqueuers = 8

// asynqInstance is asynq on its own Redis database, emptied with FLUSHDB (never
// FLUSHALL: the Redis server is shared).
type asynqInstance struct {
	tuned   bool
	opt     asynq.RedisClientOpt
	rdb     *redis.Client
	client  *asynq.Client
	insp    *asynq.Inspector
	running *asynq.Server
}

func openAsynq(ctx context.Context, cfg config, tuned bool) (instance, error) {
	opt := asynq.RedisClientOpt{Addr: cfg.Redis, DB: cfg.RedisDB}
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis, DB: cfg.RedisDB})
	if err := rdb.FlushDB(ctx).Err(); err != nil { // this database only
		rdb.Close()
		return nil, fmt.Errorf("asynq: FLUSHDB of db %d: %w", cfg.RedisDB, err)
	}
	return &asynqInstance{tuned: tuned, opt: opt, rdb: rdb, client: asynq.NewClient(opt), insp: asynq.NewInspector(opt)}, nil
}

func (q *asynqInstance) EnqueueOne(ctx context.Context, key int, due time.Time) error {
	k := strconv.Itoa(key)
	opts := []asynq.Option{asynq.TaskID(k), asynq.MaxRetry(5)}
	if !due.IsZero() {
		opts = append(opts, asynq.ProcessAt(due))
	}
	if _, err := q.client.EnqueueContext(ctx, asynq.NewTask(asynqTaskType, []byte(k)), opts...); err != nil {
		return fmt.Errorf("asynq: Enqueue: %w", err)
	}
	return nil
}

// EnqueueBatch enqueues one at a time from 8 goroutines: asynq has no batch API.
func (q *asynqInstance) EnqueueBatch(ctx context.Context, keys []int, dues []time.Time) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, enqueuers)
	for g := range enqueuers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(len(keys)); i = next.Add(1) - 1 {
				if err := q.EnqueueOne(ctx, keys[i], dues[i]); err != nil {
					errs[g] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (q *asynqInstance) Preload(ctx context.Context, dues []time.Time) error {
	keys := make([]int, len(dues))
	for i := range keys {
		keys[i] = i
	}
	return q.EnqueueBatch(ctx, keys, dues)
}

func (q *asynqInstance) Start(_ context.Context, concurrency int, h handlerFunc) error {
	c := asynq.Config{Concurrency: concurrency, Logger: nopLogger{}, LogLevel: asynq.FatalLevel}
	if q.tuned {
		c.DelayedTaskCheckInterval = 50 * time.Millisecond
		c.TaskCheckInterval = 50 * time.Millisecond
	}
	srv := asynq.NewServer(q.opt, c)
	mux := asynq.NewServeMux()
	mux.HandleFunc(asynqTaskType, func(_ context.Context, t *asynq.Task) error {
		k, err := strconv.Atoi(string(t.Payload()))
		if err != nil {
			k = -1
		}
		h(k)
		return nil
	})
	if err := srv.Start(mux); err != nil {
		return fmt.Errorf("asynq: start: %w", err)
	}
	q.running = srv
	return nil
}

// Counts reads the default queue: asynq deletes a task once it succeeded, so
// Completed is its processed-minus-failed counter and Total the tasks left.
func (q *asynqInstance) Counts(context.Context) (storeCounts, error) {
	info, err := q.insp.GetQueueInfo("default")
	if errors.Is(err, asynq.ErrQueueNotFound) {
		return storeCounts{}, nil
	}
	if err != nil {
		return storeCounts{}, fmt.Errorf("asynq: queue info: %w", err)
	}
	return storeCounts{Completed: info.ProcessedTotal - info.FailedTotal, Waiting: info.Scheduled, Total: info.Size}, nil
}

func (q *asynqInstance) Stop(context.Context) error {
	if q.running != nil {
		q.running.Shutdown()
		q.running = nil
	}
	return nil
}

func (q *asynqInstance) Close() error {
	err := errors.Join(q.client.Close(), q.insp.Close())
	if ferr := q.rdb.FlushDB(context.Background()).Err(); ferr != nil {
		err = errors.Join(err, fmt.Errorf("asynq: FLUSHDB: %w", ferr))
	}
	if err := errors.Join(err, q.rdb.Close()); err != nil {
		return fmt.Errorf("asynq: close: %w", err)
	}
	return nil
}

// nopLogger silences asynq.
type nopLogger struct{}

func (nopLogger) Debug(...any) {}
func (nopLogger) Info(...any)  {}
func (nopLogger) Warn(...any)  {}
func (nopLogger) Error(...any) {}
func (nopLogger) Fatal(...any) {}
