package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/taskquery"
)

// Applied reports how many migrations the New behind s applied.
func Applied(s *Store) int { return s.applied }

// ReadBack makes s's inserts read the rows they wrote back, as on MySQL, instead of
// taking them from INSERT … RETURNING.
func ReadBack(s *Store) { s.returning = false }

// SetHoldGrace shortens HoldGrace for one store, for tests.
func SetHoldGrace(s *Store, d time.Duration) { s.grace = d }

// Statements splits a migration file as migrate does.
var Statements = statements

// CheckVersion is checkVersion.
var CheckVersion = checkVersion

// MigrateTo migrates the database behind db up to version only, as an older ax
// would have left it.
func MigrateTo(db *sql.DB, version int) error {
	ctx := context.Background()
	s := &Store{shared: &shared{db: db}, ns: store.DefaultNamespace}
	var dbName string
	if err := db.QueryRowContext(ctx, `SELECT VERSION(), DATABASE()`).Scan(&s.version, &dbName); err != nil {
		return err
	}
	s.mariaDB = strings.Contains(strings.ToLower(s.version), "mariadb")
	_, err := s.migrate(ctx, dbName, version)
	return err
}

// TaskStatsSQL is TaskStats's statement, for TestExplain.
const TaskStatsSQL = taskStatsSQL

// TasksSQL is Tasks's statement for q in the default namespace, its arguments
// written in as literals, for TestExplain.
func TasksSQL(q store.TaskQuery) string {
	sql, args := taskquery.Select(dialect, taskColumns, "ax_tasks", store.DefaultNamespace, q)
	return inline(sql, args)
}

// AuditLogSQL is AuditLog's statement for q, continuing after a record at cursorAt
// when q pages by time, its arguments written in, for TestExplain.
func AuditLogSQL(q store.AuditQuery, cursorAt time.Time) string {
	sql, args := taskquery.AuditSelect(dialect, store.DefaultNamespace, q, cursorAt)
	return inline(sql, args)
}

// CountSQL is CountTasks's statement, its arguments written in, for TestExplain.
func CountSQL(atMost int64) string {
	sql, args := taskquery.Count(dialect, store.DefaultNamespace, atMost)
	return inline(sql, args)
}

// inline replaces each ? of sql by its argument, quoted when a string.
func inline(sql string, args []any) string {
	var b strings.Builder
	for _, part := range strings.Split(sql, "?") {
		b.WriteString(part)
		if len(args) == 0 {
			continue
		}
		switch a := args[0].(type) {
		case string:
			b.WriteString("'" + strings.ReplaceAll(a, "'", "''") + "'")
		default:
			fmt.Fprint(&b, a)
		}
		args = args[1:]
	}
	return b.String()
}

// StatsSQL and PruneStatsSQL are the statements of Stats and PruneStats.
const (
	StatsSQL      = statsSQL
	PruneStatsSQL = pruneStatsSQL
)

// The statements of SlotHistory, for TestExplain.
const (
	SlotGapsSQL        = slotGapsSQL
	TasksByKeyRangeSQL = tasksByKeyRangeSQL
	OldGapsSQL         = oldGapsSQL
)

// TasksByKeysSQL is the statement TasksByKeys runs for n keys.
func TasksByKeysSQL(n int) string { return tasksByKeysSQL(n) }

// The statements of the leadership history, for TestExplain.
const (
	HistorySQL         = historySQL
	NewestChangeSQL    = newestChangeSQL
	PruneCutSQL        = pruneCutSQL
	PruneStaySQL       = pruneStaySQL
	PruneLeadershipSQL = pruneLeadershipSQL
)

// The statements of the names' limits, for TestExplain: the names' lock and the count
// of their tasks in flight for n names, the name rule the claim's lock reads per row,
// and Names.
const (
	NameRuleSQL = nameRule
	NamesSQL    = namesSQL
)

// LockNamesSQL is lockNamesSQL.
func LockNamesSQL(n int) string { return lockNamesSQL(n) }

// InflightSQL is inflightSQL.
func InflightSQL(n int) string { return inflightSQL(n) }

// HoldersSQL is holdersSQL.
func HoldersSQL(n int, count bool) string { return holdersSQL(n, count) }

// Unheld is unheld, the claiming UPDATE's key condition.
func Unheld(n, admits int) string { return unheld(n, admits) }

// The statements of the rates per task key, for TestExplain: the claim's read of n
// keys' claim times, and PruneKeyStarts' lock of the old rows and delete of n of them.
const OldKeyStartsSQL = oldKeyStartsSQL

// KeyStartsSQL is keyStartsSQL.
func KeyStartsSQL(n int) string { return keyStartsSQL(n) }

// DeleteKeyStartsSQL is deleteKeyStartsSQL.
func DeleteKeyStartsSQL(n int) string { return deleteKeyStartsSQL(n) }

// Galera reports whether s found Galera and fences its writes so (see fence.go).
func Galera(s *Store) bool { return s.galera }

// SetGalera turns s's Galera fencing on or off, whatever New found: off, a fenced write
// on Galera is fenced as on a single server, by the shared lock alone.
func SetGalera(s *Store, on bool) { s.galera = on }

// SetAfterFence makes every fenced write of s call f once its fence check admitted it:
// before the rest of its transaction, or on Galera, where the check comes last, before
// its COMMIT (nil: none).
func SetAfterFence(s *Store, f func(store.Fence)) { s.afterFence = f }

// CausalSQL is the statement a retry on Galera waits for its node with.
const CausalSQL = causalSQL

// ReadCausally runs query in a transaction begun as a retry on Galera begins (once its
// node has caught up with the cluster) and scans its one row into dest.
func ReadCausally(ctx context.Context, s *Store, query string, dest ...any) error {
	var lo int64
	return s.attempt(ctx, 0, &lo, true, func(tx *sql.Tx, _ int64) error {
		return tx.QueryRowContext(ctx, query).Scan(dest...)
	})
}

// PoolStats is the statistics of the store's pool.
func PoolStats(s *Store) sql.DBStats { return s.db.Stats() }
