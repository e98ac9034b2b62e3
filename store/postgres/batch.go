package postgres

import (
	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/store"
)

// The execution path — Claim, Start, Heartbeat, Finish, Requeue — runs for every
// task, so each chunk of up to store.MaxBatch rows is one statement over unnest()ed
// arrays, and all the chunks of a call go out in one pipelined transaction. Every
// statement first locks its candidate rows in ascending id order (a CTE
// SELECT … ORDER BY id FOR NO KEY UPDATE), so concurrent batches queue behind each
// other instead of deadlocking, and then applies the per-row CAS conditions; a row
// whose condition fails is not touched.

// Every statement reaches rows through the primary key only: l locks the given ids
// whatever their state, and the status conditions are written so that no partial
// index on status can serve them ("t.status || ''"). Otherwise, on a table without
// fresh statistics, the planner took the SCHEDULED due-time index for a claim and
// read the whole due backlog for every batch of 200 (a 50,000-task drain ran at
// 800 tasks/s instead of thousands).
//
// Each statement locks its candidate rows first, in the CTE l; the UPDATE refers to
// l only through the variable-free condition (SELECT count(*) FROM l) >= 0, which
// PostgreSQL evaluates once, as a one-time filter, before the UPDATE reads a row. So
// the locks are taken in id order before any row is written, and the UPDATE itself
// joins only the unnest()ed input (a nested loop over the primary key), never a CTE,
// whose row count the planner cannot estimate.

// chunks calls f for consecutive chunks of at most store.MaxBatch of items.
func chunks[T any](items []T, f func(part []T)) {
	for lo := 0; lo < len(items); lo += store.MaxBatch {
		f(items[lo:min(len(items), lo+store.MaxBatch)])
	}
}

// readChunks reads the results of the statements queued by chunks over n items,
// one per chunk and in order, calling row on each of their rows.
func readChunks(br pgx.BatchResults, n int, row func(rows pgx.Rows) error) error {
	for lo := 0; lo < n; lo += store.MaxBatch {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		for rows.Next() {
			if err := row(rows); err != nil {
				rows.Close()
				return err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	return nil
}

type ref struct {
	id  int64
	eid string
}
