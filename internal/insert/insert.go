// Package insert turns concurrent single inserts into multi-row ones: the group
// commit behind Delay and At.
package insert

import (
	"context"
	"runtime"
	"sync"

	"github.com/axsched/ax/store"
)

// Inserter is what a Coalescer writes through: the store's Insert.
type Inserter interface {
	Insert(ctx context.Context, tasks []store.NewTask) ([]store.Inserted, error)
}

// Coalescer turns concurrent single inserts into multi-row ones (group commit): the
// first caller to find no insert in flight writes everything queued, again and again
// until the queue is empty; the others wait for their own result. No goroutine of its
// own, so it works whether or not the scheduler is started.
type Coalescer struct {
	mu      sync.Mutex
	queue   []*insertReq
	writing bool
}

type insertReq struct {
	task store.NewTask
	res  store.Inserted
	err  error
	done chan struct{}
}

// maxCoalesced bounds one multi-row insert.
const maxCoalesced = 1000

// Insert writes nt, in one multi-row insert with the others queued meanwhile, and
// returns when its own row is durable. A caller whose ctx ends while its row still
// waits in the queue leaves with ctx.Err() and nothing written; once its row is in a
// batch being written, it waits for that write (bounded by st) and gets its result.
func (c *Coalescer) Insert(ctx context.Context, st Inserter, nt store.NewTask) (store.Inserted, error) {
	req := &insertReq{task: nt, done: make(chan struct{})}
	c.mu.Lock()
	c.queue = append(c.queue, req)
	if c.writing {
		c.mu.Unlock()
		select {
		case <-req.done:
			return req.res, req.err
		case <-ctx.Done():
		}
		c.mu.Lock()
		for i, r := range c.queue {
			if r == req { // not taken yet: withdraw it
				c.queue = append(c.queue[:i:i], c.queue[i+1:]...)
				c.mu.Unlock()
				return store.Inserted{}, ctx.Err()
			}
		}
		c.mu.Unlock()
		<-req.done // in the batch being written: its outcome is the caller's
		return req.res, req.err
	}
	c.writing = true
	for {
		n := min(len(c.queue), maxCoalesced)
		batch := c.queue[:n:n]
		c.queue = c.queue[n:]
		c.mu.Unlock()

		nts := make([]store.NewTask, len(batch))
		for i, r := range batch {
			nts[i] = r.task
		}
		// Written on behalf of every caller in the batch: not cancelled with ours
		// (st bounds the call).
		res, err := st.Insert(context.WithoutCancel(ctx), nts)
		for i, r := range batch {
			if err != nil {
				r.err = err
			} else {
				r.res = res[i]
			}
			close(r.done)
		}

		// The callers just answered are about to submit again: let them queue
		// before looking, or the next batch holds one row and the one after the
		// rest. Yield until the queue stops growing (a few yields at most).
		for i, last := 0, -1; i < len(batch); i++ {
			runtime.Gosched()
			c.mu.Lock()
			n := len(c.queue)
			c.mu.Unlock()
			if n == last {
				break
			}
			last = n
		}
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.writing = false
			c.mu.Unlock()
			return req.res, req.err
		}
	}
}
