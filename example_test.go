package ax_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
	_ "time/tzdata" // the time zones of the examples, even where the system has none

	"github.com/axsched/ax"
	"github.com/axsched/ax/store/memory"
	"github.com/axsched/ax/store/sqlite"
)

// The quick start: a handler, a scheduler started on a store, a task submitted to run
// at once. Stop waits for the handler and writes its result.
func ExampleNew() {
	ctx := context.Background()
	s, err := ax.New(ax.Config{
		Store:        memory.New(), // sqlite.Open("ax.db") in a service
		OwnerService: "order-service",
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	s.HandleFunc("order.close.timeout", func(ctx context.Context, t *ax.Task) error {
		fmt.Printf("closing order %s\n", t.Key)
		close(done)
		return nil
	})
	if err := s.Start(ctx); err != nil {
		panic(err)
	}
	t, err := s.Delay(ctx, "order.close.timeout", "42", 0)
	if err != nil {
		panic(err)
	}
	<-done
	if err := s.Stop(ctx); err != nil {
		panic(err)
	}
	t, err = s.Get(ctx, t.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(t.Name, t.Key, t.Status, t.OwnerService)
	// Output:
	// closing order 42
	// order.close.timeout 42 SUCCEEDED order-service
}

// An order closed if it is still unpaid after its timeout: the handler fails once
// and is retried; the timeout of an order paid in time is cancelled.
func ExampleScheduler_Delay() {
	ctx := context.Background()
	s, err := ax.New(ax.Config{Store: memory.New(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	s.HandleFunc("order.close.timeout", func(ctx context.Context, t *ax.Task) error {
		if t.Attempt == 0 {
			return errors.New("orders service unavailable") // a business failure: retried
		}
		close(done)
		return nil
	}, ax.WithBackoff(func(int) time.Duration { return 0 })) // retry at once
	if err := s.Start(ctx); err != nil {
		panic(err)
	}
	unpaid, err := s.Delay(ctx, "order.close.timeout", "42", 0, ax.WithPayload([]byte(`{"amount":1999}`)))
	if err != nil {
		panic(err)
	}
	paid, err := s.Delay(ctx, "order.close.timeout", "43", 30*time.Minute)
	if err != nil {
		panic(err)
	}
	if err := s.Cancel(ctx, "order.close.timeout", "43"); err != nil { // paid in time
		panic(err)
	}
	<-done
	if err := s.Stop(ctx); err != nil {
		panic(err)
	}
	for _, id := range []int64{unpaid.ID, paid.ID} {
		t, err := s.Get(ctx, id)
		if err != nil {
			panic(err)
		}
		fmt.Printf("order %s: %s, attempt %d, last error %q\n", t.Key, t.Status, t.Attempt, t.LastError)
	}
	// Output:
	// order 42: SUCCEEDED, attempt 1, last error "orders service unavailable"
	// order 43: CANCELLED, attempt 0, last error ""
}

// A daily job at 02:30 Tokyo time. Start stores the schedule, which every scheduler
// on the store then fires once per slot.
func ExampleScheduler_Cron() {
	ctx := context.Background()
	s, err := ax.New(ax.Config{Store: memory.New(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		panic(err)
	}
	s.HandleFunc("report.daily", func(ctx context.Context, t *ax.Task) error {
		return nil // t.Key is the slot, e.g. "2026-11-29T17:30:00Z"
	})
	if err := s.Cron("report.daily", "30 2 * * *", ax.WithTimeZone(tokyo), ax.WithMisfire(ax.MisfireSkip)); err != nil {
		panic(err)
	}
	if err := s.Start(ctx); err != nil {
		panic(err)
	}
	defer s.Stop(ctx)
	list, err := s.Schedules(ctx)
	if err != nil {
		panic(err)
	}
	for _, sc := range list {
		fmt.Println(sc.Name, sc.Spec, sc.TimeZone, sc.Overlap, sc.Misfire)
		fmt.Println("next:", sc.NextFireAt.In(tokyo).Format("15:04 MST"))
	}
	// Output:
	// report.daily 30 2 * * * Asia/Tokyo skip skip
	// next: 02:30 JST
}

// Creating an order and scheduling its timeout in one transaction, on SQLite: rolled
// back, the task never existed.
func ExampleWithTx() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "ax-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "app.db")
	st, err := sqlite.Open(path)
	if err != nil {
		panic(err)
	}
	defer st.Close()
	// The application's own handle on the same file; a *sql.Tx on it joins WithTx.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY)`); err != nil {
		panic(err)
	}
	s, err := ax.New(ax.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	createOrder := func(order string, commit bool) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // a no-op after Commit
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders VALUES (?)`, order); err != nil {
			return err
		}
		if _, err := s.Delay(ctx, "order.close.timeout", order, 30*time.Minute, ax.WithTx(tx)); err != nil {
			return err
		}
		if !commit {
			return nil // rolled back: neither the order nor its timeout ever existed
		}
		return tx.Commit()
	}
	if err := errors.Join(createOrder("42", true), createOrder("43", false)); err != nil {
		panic(err)
	}
	t, err := s.Lookup(ctx, "order.close.timeout", "42")
	if err != nil {
		panic(err)
	}
	fmt.Println("order 42:", t.Status)
	_, err = s.Lookup(ctx, "order.close.timeout", "43")
	fmt.Println("order 43:", err)
	// Output:
	// order 42: SCHEDULED
	// order 43: ax: lookup "order.close.timeout"/"43": not found
}

// Replace a customer's reminder atomically, in a transaction of the store's own: the
// old one is cancelled and the new one written, or neither.
func ExampleScheduler_InTx() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "ax-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(filepath.Join(dir, "ax.db"))
	if err != nil {
		panic(err)
	}
	defer st.Close()
	s, err := ax.New(ax.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	if _, err := s.Delay(ctx, "reminder", "cust-7/v1", time.Hour); err != nil {
		panic(err)
	}
	err = s.InTx(ctx, func(ctx context.Context, tx any) error {
		if err := s.Cancel(ctx, "reminder", "cust-7/v1", ax.WithTx(tx)); err != nil {
			return err // rolled back: the old reminder stays
		}
		_, err := s.Delay(ctx, "reminder", "cust-7/v2", 2*time.Hour, ax.WithTx(tx))
		return err
	})
	if err != nil {
		panic(err)
	}
	for _, key := range []string{"cust-7/v1", "cust-7/v2"} {
		t, err := s.Lookup(ctx, "reminder", key)
		if err != nil {
			panic(err)
		}
		fmt.Println(key, t.Status)
	}
	// Output:
	// cust-7/v1 CANCELLED
	// cust-7/v2 SCHEDULED
}

// Many tasks in one transaction; one whose (name, key) exists gets the existing task
// in its place, and the error wraps ErrDuplicate.
func ExampleScheduler_SubmitMany() {
	ctx := context.Background()
	s, err := ax.New(ax.Config{Store: memory.New(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	first, err := s.Delay(ctx, "invoice.send", "A-1", time.Hour)
	if err != nil {
		panic(err)
	}
	at := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	tasks, err := s.SubmitMany(ctx, []ax.TaskSpec{
		{Name: "invoice.send", Key: "A-1", DueAt: at},
		{Name: "invoice.send", Key: "A-2", DueAt: at, Payload: []byte("A-2.pdf")},
		{Name: "invoice.send", Key: "A-3", DueAt: at.Add(time.Minute), Options: []ax.TaskOption{ax.WithMaxRetry(1)}},
	}, ax.WithMaxRetry(3))
	fmt.Println(err)
	fmt.Println(errors.Is(err, ax.ErrDuplicate))
	for _, t := range tasks {
		fmt.Printf("%s: existing %t, MaxRetry %d, payload %q\n", t.Key, t.ID == first.ID, t.MaxRetry, t.Payload)
	}
	// Output:
	// ax: submit many: 1 of 3 tasks exist: duplicate task
	// true
	// A-1: existing true, MaxRetry 5, payload ""
	// A-2: existing false, MaxRetry 3, payload "A-2.pdf"
	// A-3: existing false, MaxRetry 1, payload ""
}

// The fire times of a daily 02:30 job in Berlin around the spring-forward day, when
// 02:30 does not exist: it fires once, at the jump to 03:00.
func ExampleNextFireTimes() {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		panic(err)
	}
	from := time.Date(2026, 3, 28, 0, 0, 0, 0, time.UTC)
	times, err := ax.NextFireTimes("30 2 * * *", berlin, from, 3)
	if err != nil {
		panic(err)
	}
	for _, t := range times {
		fmt.Println(t.Format(time.RFC3339), t.In(berlin).Format("Mon 15:04 MST"))
	}
	// Output:
	// 2026-03-28T01:30:00Z Sat 02:30 CET
	// 2026-03-29T01:00:00Z Sun 03:00 CEST
	// 2026-03-30T00:30:00Z Mon 02:30 CEST
}

// Finding tasks: the failed and scheduled timeouts of one customer's orders, soonest
// first, a page at a time, and the counts by status.
func ExampleScheduler_Tasks() {
	ctx := context.Background()
	s, err := ax.New(ax.Config{Store: memory.New(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	for i, key := range []string{"cust-7/order-1", "cust-7/order-2", "cust-9/order-3", "cust-7/order-4"} {
		if _, err := s.Delay(ctx, "order.close.timeout", key, time.Duration(30+i)*time.Minute); err != nil {
			panic(err)
		}
	}
	q := ax.TaskQuery{
		Name:      "order.close.timeout",
		KeyPrefix: "cust-7/",
		Statuses:  []ax.Status{ax.Scheduled, ax.Failed},
		Order:     ax.SoonestFirst,
		Limit:     2,
	}
	for {
		page, err := s.Tasks(ctx, q)
		if err != nil {
			panic(err)
		}
		for _, t := range page.Tasks {
			fmt.Println(t.Key, t.Status)
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	counts, err := s.Counts(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("scheduled:", counts[ax.Scheduled])
	// Output:
	// cust-7/order-1 SCHEDULED
	// cust-7/order-2 SCHEDULED
	// cust-7/order-4 SCHEDULED
	// scheduled: 4
}

// Reusing a business key: a cancelled order timeout's key can be scheduled again (the
// default, UniqueLive), while a welcome email's handler keeps its keys for good.
func ExampleWithUnique() {
	ctx := context.Background()
	s, err := ax.New(ax.Config{Store: memory.New(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	s.HandleFunc("welcome.email", func(context.Context, *ax.Task) error { return nil }, ax.WithUnique(ax.UniqueForever))

	first, _ := s.Delay(ctx, "order.close.timeout", "order-42", 30*time.Minute)
	if err := s.Cancel(ctx, "order.close.timeout", "order-42"); err != nil {
		panic(err)
	}
	second, err := s.Delay(ctx, "order.close.timeout", "order-42", 30*time.Minute)
	old, _ := s.Get(ctx, first.ID)
	fmt.Println("after a cancel:", err, second.ID != first.ID, old.Status, old.Superseded)

	welcome, _ := s.Delay(ctx, "welcome.email", "user-7", time.Hour)
	if err := s.Cancel(ctx, "welcome.email", "user-7"); err != nil {
		panic(err)
	}
	again, err := s.Delay(ctx, "welcome.email", "user-7", time.Hour)
	fmt.Println("forever:", errors.Is(err, ax.ErrDuplicate), again.ID == welcome.ID)

	// A deduplication window: the key stays taken for a day after the submit.
	daily, _ := s.Delay(ctx, "report.send", "2030-01-01", 0, ax.WithUnique(ax.UniqueFor(24*time.Hour)))
	fmt.Println("window:", daily.KeyUntil.Sub(daily.CreatedAt).Round(time.Hour))
	// Output:
	// after a cancel: <nil> true CANCELLED true
	// forever: true true
	// window: 24h0m0s
}

// The namespace's executions of the last hour, per minute, as a console shows them:
// every scheduler writes its own minutes to the store, and Stats sums them.
func ExampleScheduler_Stats() {
	ctx := context.Background()
	s, err := ax.New(ax.Config{
		Store:  memory.New(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	var wg sync.WaitGroup
	wg.Add(3)
	s.HandleFunc("invoice.send", func(ctx context.Context, t *ax.Task) error {
		defer wg.Done()
		if t.Key == "3" {
			return errors.New("mail server down")
		}
		return nil
	}, ax.WithMaxRetry(0))
	if err := s.Start(ctx); err != nil {
		panic(err)
	}
	for _, key := range []string{"1", "2", "3"} {
		if _, err := s.Delay(ctx, "invoice.send", key, 0); err != nil {
			panic(err)
		}
	}
	wg.Wait()
	if err := s.Stop(ctx); err != nil { // writes the last results' minute
		panic(err)
	}
	sum, err := s.Stats(ctx, time.Now().Add(-time.Hour))
	if err != nil {
		panic(err)
	}
	fmt.Println("succeeded:", sum.Executions.Succeeded, "failed:", sum.Executions.Failed, "early starts:", sum.Early)
	fmt.Println("failing most:", sum.TopFailing)
	// Output:
	// succeeded: 2 failed: 1 early starts: 0
	// failing most: [{invoice.send 1}]
}

// A handler that honours a remote API's Retry-After: it snoozes, which runs the task
// again later without spending a retry, and ends a task it can never complete with a
// permanent error, which is not retried.
func ExampleSnooze() {
	ctx := context.Background()
	s, err := ax.New(ax.Config{Store: memory.New(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	s.HandleFunc("invoice.send", func(ctx context.Context, t *ax.Task) error {
		switch {
		case t.Key == "deleted-account":
			defer wg.Done()
			return ax.Permanent(errors.New("account deleted"))
		case t.Snoozes == 0:
			return ax.Snooze(10 * time.Millisecond) // "429 Too Many Requests, Retry-After: …"
		}
		defer wg.Done()
		return nil
	}, ax.WithMaxRetry(3))
	if err := s.Start(ctx); err != nil {
		panic(err)
	}
	sent, err := s.Delay(ctx, "invoice.send", "inv-1", 0)
	if err != nil {
		panic(err)
	}
	gone, err := s.Delay(ctx, "invoice.send", "deleted-account", 0)
	if err != nil {
		panic(err)
	}
	wg.Wait()
	if err := s.Stop(ctx); err != nil {
		panic(err)
	}
	for _, id := range []int64{sent.ID, gone.ID} {
		t, err := s.Get(ctx, id)
		if err != nil {
			panic(err)
		}
		execs, err := s.Executions(ctx, id)
		if err != nil {
			panic(err)
		}
		var runs []ax.Status
		for _, x := range execs {
			runs = append(runs, x.Status)
		}
		fmt.Printf("%s: %s, attempt %d, snoozes %d, runs %v, last error %q\n", t.Key, t.Status, t.Attempt, t.Snoozes, runs, t.LastError)
	}
	// Output:
	// inv-1: SUCCEEDED, attempt 0, snoozes 1, runs [SNOOZED SUCCEEDED], last error "snoozed for 10ms"
	// deleted-account: FAILED, attempt 0, snoozes 0, runs [FAILED], last error "permanent, not retried: account deleted"
}

// Cancelling a task while it runs: its handler's context is cancelled with
// ErrCancelled as the cause, and the task ends CANCELLED without a retry.
func ExampleScheduler_Cancel() {
	ctx := context.Background()
	s, err := ax.New(ax.Config{Store: memory.New(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	running := make(chan struct{})
	s.HandleFunc("export", func(ctx context.Context, t *ax.Task) error {
		close(running)
		<-ctx.Done() // a long export, checking its context
		fmt.Println("stopped:", context.Cause(ctx) == ax.ErrCancelled)
		return ctx.Err()
	})
	if err := s.Start(ctx); err != nil {
		panic(err)
	}
	t, err := s.Delay(ctx, "export", "customer-7", 0)
	if err != nil {
		panic(err)
	}
	<-running
	if err := s.Cancel(ctx, "export", "customer-7", ax.WithActor("alice")); err != nil {
		panic(err)
	}
	if err := s.Stop(ctx); err != nil { // waits for the handler and its result
		panic(err)
	}
	t, err = s.Get(ctx, t.ID)
	if err != nil {
		panic(err)
	}
	execs, err := s.Executions(ctx, t.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(t.Status, t.CancelledBy, execs[0].Status, execs[0].Error)
	// Output:
	// stopped: true
	// CANCELLED alice CANCELLED cancelled by alice: context canceled
}

// A handler that writes its effect and finishes its task in one transaction on the
// store's database: both commit, or neither, and an execution that was run again
// elsewhere meanwhile cannot commit its effect (CompleteTx answers ErrNotCurrent).
func ExampleScheduler_CompleteTx() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "ax-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "app.db")
	st, err := sqlite.Open(path)
	if err != nil {
		panic(err)
	}
	defer st.Close()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE refunds (order_id TEXT PRIMARY KEY)`); err != nil {
		panic(err)
	}
	s, err := ax.New(ax.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	s.HandleFunc("order.refund", func(ctx context.Context, t *ax.Task) error {
		defer close(done)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // a no-op after Commit
		if _, err := tx.ExecContext(ctx, `INSERT INTO refunds VALUES (?)`, t.Key); err != nil {
			return err
		}
		if err := s.CompleteTx(ctx, tx, t); err != nil {
			return err // ErrNotCurrent: rolled back, the refund never happened here
		}
		return tx.Commit()
	})
	if err := s.Start(ctx); err != nil {
		panic(err)
	}
	t, err := s.Delay(ctx, "order.refund", "42", 0)
	if err != nil {
		panic(err)
	}
	<-done
	if err := s.Stop(ctx); err != nil {
		panic(err)
	}
	t, err = s.Get(ctx, t.ID)
	if err != nil {
		panic(err)
	}
	var refunds int
	if err := db.QueryRow(`SELECT count(*) FROM refunds`).Scan(&refunds); err != nil {
		panic(err)
	}
	fmt.Println(t.Status, "refunds:", refunds)
	// Output:
	// SUCCEEDED refunds: 1
}

// Pausing a task name holds its tasks, on every scheduler sharing the store, until it
// is resumed; other names run on.
func ExampleScheduler_PauseName() {
	ctx := context.Background()
	s, err := ax.New(ax.Config{Store: memory.New(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	ran := make(chan string, 2)
	handle := func(ctx context.Context, t *ax.Task) error { ran <- t.Name; return nil }
	s.HandleFunc("report", handle)
	s.HandleFunc("mail", handle)
	st, err := s.PauseName(ctx, "report", ax.WithActor("alice"))
	if err != nil {
		panic(err)
	}
	fmt.Println("report paused:", st.Paused, "by", st.ChangedBy)
	if err := s.Start(ctx); err != nil {
		panic(err)
	}
	if _, err := s.Delay(ctx, "report", "daily", 0); err != nil {
		panic(err)
	}
	if _, err := s.Delay(ctx, "mail", "welcome", 10*time.Millisecond); err != nil { // due after the report
		panic(err)
	}
	fmt.Println("ran:", <-ran) // the mail: the report waits
	if _, err := s.ResumeName(ctx, "report", ax.WithActor("alice")); err != nil {
		panic(err)
	}
	fmt.Println("ran:", <-ran)
	if err := s.Stop(ctx); err != nil {
		panic(err)
	}
	// Output:
	// report paused: true by alice
	// ran: mail
	// ran: report
}

// WithConcurrency caps a task name's tasks in flight on every scheduler of the
// namespace: here 2 at a time, although the scheduler could run 100.
func ExampleWithConcurrency() {
	ctx := context.Background()
	s, err := ax.New(ax.Config{Store: memory.New(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	var mu sync.Mutex
	running, most := 0, 0
	done := make(chan struct{}, 6)
	s.HandleFunc("export", func(ctx context.Context, t *ax.Task) error {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		running--
		mu.Unlock()
		done <- struct{}{}
		return nil
	}, ax.WithConcurrency(2))
	if err := s.Start(ctx); err != nil {
		panic(err)
	}
	for i := range 6 {
		if _, err := s.Delay(ctx, "export", fmt.Sprint("customer-", i), 0); err != nil {
			panic(err)
		}
	}
	for range 6 {
		<-done
	}
	names, err := s.Names(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(names[0].Name, "limited to", names[0].Concurrency)
	mu.Lock()
	fmt.Println("most at once:", most)
	mu.Unlock()
	if err := s.Stop(ctx); err != nil {
		panic(err)
	}
	// Output:
	// export limited to 2
	// most at once: 2
}

// WithRate caps a task name's starts per period on every scheduler of the
// namespace: here 2 per 200ms, so that the third of three tasks due at once starts
// a window after the first.
func ExampleWithRate() {
	ctx := context.Background()
	s, err := ax.New(ax.Config{Store: memory.New(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	started := make(chan time.Time, 3)
	s.HandleFunc("charge", func(ctx context.Context, t *ax.Task) error {
		started <- t.DispatchedAt // the claim: a start, for the rate
		return nil
	}, ax.WithRate(2, 200*time.Millisecond))
	if err := s.Start(ctx); err != nil {
		panic(err)
	}
	for i := range 3 {
		if _, err := s.Delay(ctx, "charge", fmt.Sprint("order-", i), 0); err != nil {
			panic(err)
		}
	}
	first, _, third := <-started, <-started, <-started
	fmt.Println("the third waited for the window:", third.Sub(first) > 200*time.Millisecond)
	names, err := s.Names(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(names[0].Name, names[0].Rate, "per", names[0].Per)
	if err := s.Stop(ctx); err != nil {
		panic(err)
	}
	// Output:
	// the third waited for the window: true
	// charge 2 per 200ms
}

// SetRate changes a name's rate limit at run time, on every scheduler of the
// namespace; 0 removes it.
func ExampleScheduler_SetRate() {
	ctx := context.Background()
	s, err := ax.New(ax.Config{Store: memory.New(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	st, err := s.SetRate(ctx, "charge", 100, time.Minute, ax.WithActor("alice"))
	if err != nil {
		panic(err)
	}
	fmt.Println(st.Name, st.Rate, "per", st.Per, "by", st.ChangedBy)
	st, err = s.SetConcurrency(ctx, "charge", 5, ax.WithActor("alice"))
	if err != nil {
		panic(err)
	}
	fmt.Println("and at most", st.Concurrency, "at once")
	// Output:
	// charge 100 per 1m0s by alice
	// and at most 5 at once
}

// WithKeyConcurrency lets n tasks that share a task key run at once instead of one:
// here at most 2 exports per customer, while other customers' run beside them.
func ExampleWithKeyConcurrency() {
	ctx := context.Background()
	s, err := ax.New(ax.Config{Store: memory.New(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	var mu sync.Mutex
	running, most := map[string]int{}, map[string]int{}
	done := make(chan struct{}, 8)
	s.HandleFunc("export", func(ctx context.Context, t *ax.Task) error {
		customer := string(t.Payload)
		mu.Lock()
		running[customer]++
		most[customer] = max(most[customer], running[customer])
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		running[customer]--
		mu.Unlock()
		done <- struct{}{}
		return nil
	}, ax.WithKeyConcurrency(2))
	if err := s.Start(ctx); err != nil {
		panic(err)
	}
	for i := range 8 {
		customer := []string{"acme", "globex"}[i%2]
		_, err := s.Delay(ctx, "export", fmt.Sprint("report-", i), 0, ax.WithTaskKey(customer), ax.WithPayload([]byte(customer)))
		if err != nil {
			panic(err)
		}
	}
	for range 8 {
		<-done
	}
	mu.Lock()
	fmt.Println("most at once per customer:", most["acme"], most["globex"])
	mu.Unlock()
	if err := s.Stop(ctx); err != nil {
		panic(err)
	}
	// Output:
	// most at once per customer: 2 2
}

// WithKeyRate caps the starts per period of each task key's tasks: here 1 sync per
// customer per 200ms, so that a customer's second sync waits a window while another
// customer's first runs at once.
func ExampleWithKeyRate() {
	ctx := context.Background()
	s, err := ax.New(ax.Config{Store: memory.New(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	type start struct {
		customer string
		at       time.Time
	}
	started := make(chan start, 3)
	s.HandleFunc("sync", func(ctx context.Context, t *ax.Task) error {
		started <- start{string(t.Payload), t.DispatchedAt} // the claim: a start, for the rate
		return nil
	}, ax.WithKeyRate(1, 200*time.Millisecond))
	if err := s.Start(ctx); err != nil {
		panic(err)
	}
	for i, customer := range []string{"acme", "acme", "globex"} {
		_, err := s.Delay(ctx, "sync", fmt.Sprint("sync-", i), 0, ax.WithTaskKey(customer), ax.WithPayload([]byte(customer)))
		if err != nil {
			panic(err)
		}
	}
	at := map[string][]time.Time{}
	for range 3 {
		st := <-started
		at[st.customer] = append(at[st.customer], st.at)
	}
	fmt.Println("acme's second waited for the window:", at["acme"][1].Sub(at["acme"][0]) > 200*time.Millisecond)
	fmt.Println("globex waited for acme:", at["globex"][0].Sub(at["acme"][0]) > 200*time.Millisecond)
	names, err := s.Names(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(names[0].Name, names[0].KeyRate, "per", names[0].KeyPer, "per key")
	if err := s.Stop(ctx); err != nil {
		panic(err)
	}
	// Output:
	// acme's second waited for the window: true
	// globex waited for acme: false
	// sync 1 per 200ms per key
}

// SetKeyRate changes a name's rate per task key at run time, on every scheduler of
// the namespace; 0 removes it.
func ExampleScheduler_SetKeyRate() {
	ctx := context.Background()
	s, err := ax.New(ax.Config{Store: memory.New(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	st, err := s.SetKeyRate(ctx, "sync", 10, time.Minute, ax.WithActor("alice"))
	if err != nil {
		panic(err)
	}
	fmt.Println(st.Name, st.KeyRate, "per", st.KeyPer, "per key, by", st.ChangedBy)
	// Output:
	// sync 10 per 1m0s per key, by alice
}
