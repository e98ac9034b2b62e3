package mysql

import (
	"context"
	"crypto/sha1"
	"database/sql"
	"database/sql/driver"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
	"github.com/axsched/ax/store/internal/taskquery"
)

//go:embed migrations/*.sql
var migrations embed.FS

// HoldGrace is how long a sequence range handed to a transaction that has not yet
// locked it is presumed in use (see DESIGN.md, "The refill cursor"). An unlocked
// range older than this belongs to a transaction that rolled back or died, and Refill
// moves past it. It bounds how long a rolled-back submit can delay the change cursor;
// it never makes a refill skip a row that later commits.
const HoldGrace = 5 * time.Second

// MigrateLockTimeout is how long New waits for another process's migration.
const MigrateLockTimeout = 60 * time.Second

// maxAttempts is how often a transaction is tried when it hits a deadlock (1213), a
// lock wait timeout (1205) or a Galera node without a primary component (1047).
const maxAttempts = 6

// maxIdleConns is how many idle connections the pool Open makes keeps.
const maxIdleConns = 16

// Store is the MySQL/MariaDB implementation of store.Store and store.Transactor. It
// is safe for concurrent use, and several processes may share the database.
//
// A Store is the view of one namespace (see InNamespace): the store Open and New return
// is the view of store.DefaultNamespace, and every view of it shares its pool, its
// settings and its closed flag through one *shared.
type Store struct {
	*shared
	ns string // the view's namespace, stamped on the rows it writes and filtering its reads
}

// shared is the state of one opened store, common to all its views.
type shared struct {
	db      *sql.DB
	own     bool           // Open made db: Close closes it
	txOpts  *sql.TxOptions // READ COMMITTED per transaction; nil when every session is already
	mariaDB bool
	// returning: INSERT … RETURNING gives back the rows an insert wrote (MariaDB;
	// MySQL reads them back).
	returning bool
	version   string
	// galera: the server replicates with Galera (wsrep_on), and a fenced write writes
	// its namespace's ax_leader row (see fence.go).
	galera   bool
	identity string // host:port/database, to recognise a *sql.Tx on the same database
	grace    time.Duration
	applied  int // migrations this New applied (for tests)
	closed   atomic.Bool
	// inTx bounds the transactions of InTx open at once to half the pool, so that a
	// call in one that uses a connection of its own (a sequence number's
	// reservation, a read of ax's) always finds one.
	inTx chan struct{}
	// txHolds holds, per open InTx transaction, the sequence holds it took, so that
	// InTx releases those it did not commit (noteHold).
	holdsMu sync.Mutex
	txHolds map[*sql.Tx]*[]int64
	// afterFence, set by tests only, is called by a fenced write once its fence check
	// admitted it: before the rest of its transaction, or on Galera before its COMMIT.
	afterFence func(store.Fence)
	// atCommit holds, on Galera, the fence of each transaction of run's whose fence
	// check waits for its end (see fence.go).
	fenceMu  sync.Mutex
	atCommit map[*sql.Tx]store.Fence
}

var (
	_ store.Store      = (*Store)(nil)
	_ store.Transactor = (*Store)(nil)
)

// InNamespace returns the view of namespace ns: a *Store on the same pool that reads
// and writes only ns's rows (see store.Store.InNamespace and DESIGN.md, "Namespaces").
// Closing any view closes them all. ns must be non-empty, at most store.MaxNamespace
// bytes and free of white space, else store.ErrInvalid.
func (s *Store) InNamespace(ns string) (store.Store, error) {
	if err := store.CheckNamespace(ns); err != nil {
		return nil, fmt.Errorf("ax: mysql: in namespace: %w", err)
	}
	return &Store{shared: s.shared, ns: ns}, nil
}

// Open opens a pool on the database named by dsn (a go-sql-driver/mysql DSN, e.g.
// "user:pass@tcp(host:3306)/ax"), migrates its schema and returns the store; Close
// closes the pool. Open sets what the store needs on every session: parseTime, UTC,
// time_zone '+00:00', READ COMMITTED (transaction_isolation on MySQL, tx_isolation on
// MariaDB before 11.1), client-side parameter interpolation (one round trip per
// statement; safe because the connection charset is utf8mb4) and clientFoundRows off
// (rows affected count changed rows, not matched ones).
func Open(dsn string) (*Store, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("ax: mysql: open: %v: %w", err, store.ErrInvalid)
	}
	if cfg.DBName == "" {
		return nil, fmt.Errorf("ax: mysql: open: the DSN names no database: %w", store.ErrInvalid)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.InterpolateParams = true
	cfg.ClientFoundRows = false // AcquireLease tells an insert from a duplicate by the rows affected
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout+5*time.Second)
	defer cancel()

	// Which variable sets the isolation level differs by server: ask one connection.
	probe, err := openConfig(cfg)
	if err != nil {
		return nil, err
	}
	variable := "transaction_isolation"
	var level string
	if err := probe.QueryRowContext(ctx, `SELECT @@transaction_isolation`).Scan(&level); err != nil {
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1193 { // 1193: unknown system variable
			probe.Close()
			return nil, fmt.Errorf("ax: mysql: open %s: %w", cfg.Addr, err)
		}
		variable = "tx_isolation" // MariaDB before 11.1
	}
	probe.Close()
	cfg.Params[variable] = "'READ-COMMITTED'"

	db, err := openConfig(cfg)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(maxIdleConns)
	db.SetConnMaxLifetime(30 * time.Minute)
	s, err := newStore(ctx, db, true)
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func openConfig(cfg *mysql.Config) (*sql.DB, error) {
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("ax: mysql: open: %v: %w", err, store.ErrInvalid)
	}
	return sql.OpenDB(conn), nil
}

// New migrates the database behind db (under a lock, so that several processes
// starting at once migrate it exactly once) and returns a store on it. The caller owns
// db: Close does not close it. db's sessions may run at any isolation level; the store
// sets READ COMMITTED on each of its transactions. Times are read correctly whatever
// parseTime says, provided loc is UTC (the driver's default). db must not set
// clientFoundRows (the driver's default is off): New refuses it with store.ErrInvalid,
// since rows affected must count changed rows, not matched ones.
func New(db *sql.DB) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("ax: mysql: new: nil *sql.DB: %w", store.ErrInvalid)
	}
	ctx, cancel := context.WithTimeout(context.Background(), MigrateLockTimeout+30*time.Second)
	defer cancel()
	return newStore(ctx, db, false)
}

func newStore(ctx context.Context, db *sql.DB, sessionRC bool) (*Store, error) {
	inTx := 64 // an unbounded pool
	if n := db.Stats().MaxOpenConnections; n > 0 {
		inTx = max(1, n/2)
	}
	s := &Store{shared: &shared{db: db, own: sessionRC, grace: HoldGrace, inTx: make(chan struct{}, inTx),
		txHolds: map[*sql.Tx]*[]int64{}, atCommit: map[*sql.Tx]store.Fence{}}, ns: store.DefaultNamespace}
	if !sessionRC {
		s.txOpts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	var host, dbName sql.NullString
	var port int
	if err := db.QueryRowContext(ctx, `SELECT VERSION(), @@hostname, @@port, DATABASE()`).Scan(&s.version, &host, &port, &dbName); err != nil {
		return nil, fmt.Errorf("ax: mysql: connect: %w", err)
	}
	if !dbName.Valid || dbName.String == "" {
		return nil, fmt.Errorf("ax: mysql: connect: no database selected: %w", store.ErrInvalid)
	}
	s.identity = fmt.Sprintf("%s:%d/%s", host.String, port, dbName.String)
	s.mariaDB = strings.Contains(strings.ToLower(s.version), "mariadb")
	s.returning = s.mariaDB
	if err := checkVersion(s.version, s.mariaDB); err != nil {
		return nil, err
	}
	galera, err := checkGalera(ctx, db)
	if err != nil {
		return nil, err
	}
	s.galera = galera
	n, err := s.migrate(ctx, dbName.String, SchemaVersion())
	if err != nil {
		return nil, err
	}
	s.applied = n
	if !sessionRC {
		if err := checkChangedRows(ctx, db); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// checkChangedRows refuses a pool whose sessions report matched rows as affected
// (clientFoundRows): an UPDATE that sets a row to its current values must count 0.
func checkChangedRows(ctx context.Context, db *sql.DB) error {
	res, err := db.ExecContext(ctx, `UPDATE ax_schema_migrations SET version = version WHERE version = 1`)
	if err != nil {
		return fmt.Errorf("ax: mysql: connect: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("ax: mysql: connect: %w", err)
	}
	if n != 0 {
		return fmt.Errorf("ax: mysql: connect: the pool sets clientFoundRows; the store needs rows affected to count changed rows: %w", store.ErrInvalid)
	}
	return nil
}

// checkGalera reports whether db's server replicates with Galera (wsrep_on; MySQL has
// no such variable, MariaDB without a cluster says OFF) and then refuses, with
// store.ErrInvalid naming the setting, what the store cannot be correct on there: a
// binlog_format other than ROW (Galera replicates row events only) and a
// wsrep_OSU_method other than TOI (the migrations' DDL would change one node's schema
// only). See "Galera" in the package doc.
func checkGalera(ctx context.Context, db *sql.DB) (bool, error) {
	var on int
	if err := db.QueryRowContext(ctx, `SELECT @@wsrep_on`).Scan(&on); err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1193 { // unknown system variable: no Galera
			return false, nil
		}
		return false, fmt.Errorf("ax: mysql: connect: %w", err)
	}
	if on == 0 {
		return false, nil
	}
	var binlogFormat, osuMethod string
	if err := db.QueryRowContext(ctx, `SELECT @@binlog_format, @@wsrep_OSU_method`).Scan(&binlogFormat, &osuMethod); err != nil {
		return false, fmt.Errorf("ax: mysql: connect: %w", err)
	}
	if !strings.EqualFold(binlogFormat, "ROW") {
		return false, fmt.Errorf("ax: mysql: connect: Galera (wsrep_on) with binlog_format %s: ax needs binlog_format ROW: %w", binlogFormat, store.ErrInvalid)
	}
	if !strings.EqualFold(osuMethod, "TOI") {
		return false, fmt.Errorf("ax: mysql: connect: Galera (wsrep_on) with wsrep_OSU_method %s: ax needs wsrep_OSU_method TOI, so that its migrations reach every node: %w", osuMethod, store.ErrInvalid)
	}
	return true, nil
}

// checkVersion refuses servers without FOR UPDATE SKIP LOCKED (MySQL 8.0.1, MariaDB
// 10.6) or, on MySQL, the utf8mb4_0900_bin collation (8.0.17).
func checkVersion(version string, mariaDB bool) error {
	var major, minor, patch int
	fmt.Sscanf(version, "%d.%d.%d", &major, &minor, &patch)
	ok := major > 8 || (major == 8 && (minor > 0 || patch >= 17))
	need := "MySQL 8.0.17"
	if mariaDB {
		ok = major > 10 || (major == 10 && minor >= 6)
		need = "MariaDB 10.6"
	}
	if !ok {
		return fmt.Errorf("ax: mysql: server %s is too old: ax needs %s or later: %w", version, need, store.ErrInvalid)
	}
	return nil
}

// Close releases the store, and with it every view of it; it closes the pool only when
// Open made it. Calls after Close, on any view, return store.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return fmt.Errorf("ax: mysql: close: %w", store.ErrClosed)
	}
	if s.own {
		return s.db.Close()
	}
	return nil
}

// SchemaVersion is the highest migration this package knows.
func SchemaVersion() int {
	n, _ := latestMigration()
	return n
}

func latestMigration() (int, []string) {
	names, _ := fs.Glob(migrations, "migrations/*.sql")
	sort.Strings(names)
	return len(names), names
}

// statements splits a migration file into its statements: they end with ';' at the
// end of a line; lines starting with "--" are comments.
func statements(body, collation string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(body, "\n") {
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(strings.TrimSpace(line), ";") {
			out = append(out, strings.ReplaceAll(strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"), "{{bin}}", collation))
			cur.Reset()
		}
	}
	return out
}

// lockName is the GET_LOCK name for migrating database db (at most 64 characters).
func lockName(db string) string {
	name := "ax_migrate_" + db
	if len(name) > 64 {
		sum := sha1.Sum([]byte(db))
		name = "ax_migrate_" + hex.EncodeToString(sum[:])
	}
	return name
}

// migrate applies the missing migrations up to version upTo under GET_LOCK and
// returns how many it applied. MySQL commits each DDL statement on its own, so
// progress is recorded per statement in ax_schema_migrations (step; applied_at stays
// NULL until the migration is complete): a migration interrupted by a crash resumes at
// its next statement. The statement it resumes at may have taken effect before the
// crash without its step being recorded: an ALTER TABLE (which MySQL cannot make
// conditional) then fails with "duplicate column", "duplicate key name" or, for a
// statement that only drops a key, "can't drop", and that is taken as done.
func (s *Store) migrate(ctx context.Context, dbName string, upTo int) (int, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("ax: mysql: migrate: %w", err)
	}
	defer conn.Close()
	lock := lockName(dbName)
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(?, ?)`, lock, int(MigrateLockTimeout/time.Second)).Scan(&got); err != nil {
		return 0, fmt.Errorf("ax: mysql: migrate: lock %s: %w", lock, err)
	}
	if got.Int64 != 1 {
		return 0, fmt.Errorf("ax: mysql: migrate: lock %s not granted within %v", lock, MigrateLockTimeout)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		var r sql.NullInt64
		conn.QueryRowContext(ctx, `SELECT RELEASE_LOCK(?)`, lock).Scan(&r)
	}()
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS ax_schema_migrations (
		version    INT         NOT NULL,
		step       INT         NOT NULL DEFAULT 0,
		started_at DATETIME(6) NOT NULL,
		applied_at DATETIME(6) NULL,
		PRIMARY KEY (version)) ENGINE = InnoDB`); err != nil {
		return 0, fmt.Errorf("ax: mysql: migrate: %w", err)
	}
	type state struct {
		step int
		done bool
	}
	have := map[int]state{}
	rows, err := conn.QueryContext(ctx, `SELECT version, step, applied_at IS NOT NULL FROM ax_schema_migrations`)
	if err != nil {
		return 0, fmt.Errorf("ax: mysql: migrate: %w", err)
	}
	maxVersion := 0
	for rows.Next() {
		var v int
		var st state
		if err := rows.Scan(&v, &st.step, &st.done); err != nil {
			rows.Close()
			return 0, fmt.Errorf("ax: mysql: migrate: %w", err)
		}
		have[v] = st
		maxVersion = max(maxVersion, v)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("ax: mysql: migrate: %w", err)
	}
	want, names := latestMigration()
	if maxVersion > want {
		return 0, fmt.Errorf("ax: mysql: migrate: database is at schema version %d, this ax knows up to %d: %w", maxVersion, want, store.ErrSchemaVersion)
	}
	collation := "utf8mb4_0900_bin"
	if s.mariaDB {
		collation = "utf8mb4_nopad_bin"
	}
	applied := 0
	for v := 1; v <= min(upTo, want); v++ {
		st, ok := have[v]
		if st.done {
			continue
		}
		body, err := migrations.ReadFile(names[v-1])
		if err != nil {
			return applied, err
		}
		if !ok {
			if _, err := conn.ExecContext(ctx, `INSERT INTO ax_schema_migrations (version, step, started_at) VALUES (?, 0, UTC_TIMESTAMP(6))`, v); err != nil {
				return applied, fmt.Errorf("ax: mysql: migrate %s: %w", names[v-1], err)
			}
		}
		stmts := statements(string(body), collation)
		for k := st.step; k < len(stmts); k++ {
			if _, err := conn.ExecContext(ctx, stmts[k]); err != nil && !(ok && k == st.step && alreadyApplied(err)) {
				return applied, fmt.Errorf("ax: mysql: migrate %s, statement %d: %w", names[v-1], k+1, err)
			}
			if _, err := conn.ExecContext(ctx, `UPDATE ax_schema_migrations SET step = ? WHERE version = ?`, k+1, v); err != nil {
				return applied, fmt.Errorf("ax: mysql: migrate %s: %w", names[v-1], err)
			}
		}
		if _, err := conn.ExecContext(ctx, `UPDATE ax_schema_migrations SET applied_at = UTC_TIMESTAMP(6) WHERE version = ?`, v); err != nil {
			return applied, fmt.Errorf("ax: mysql: migrate %s: %w", names[v-1], err)
		}
		applied++
	}
	return applied, nil
}

// alreadyApplied reports whether err is what an ALTER TABLE that already took effect
// answers when run again: a duplicate column (1060), a duplicate key name (1061) or,
// for a DROP KEY, a key that is not there (1091).
func alreadyApplied(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1060 || me.Number == 1061 || me.Number == 1091)
}

// Now returns the database server's current time in UTC (UTC_TIMESTAMP(6): the start
// of the statement, which for a statement of its own is now).
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	if err := s.check("now"); err != nil {
		return time.Time{}, err
	}
	var t time.Time
	if err := s.db.QueryRowContext(ctx, `SELECT UTC_TIMESTAMP(6)`).Scan(dbTime{&t}); err != nil {
		return time.Time{}, s.wrap("now", err)
	}
	return t, nil
}

func (s *Store) check(op string) error {
	if s.closed.Load() {
		return fmt.Errorf("ax: mysql: %s: %w", op, store.ErrClosed)
	}
	return nil
}

// errRetry asks run to try the transaction again (a race it lost, e.g. on a unique key).
var errRetry = errors.New("retry")

// retryable reports whether a transaction that failed with err wrote nothing, for sure,
// and may simply run again: a deadlock (1213, also how Galera refuses a transaction that
// lost certification) or a lock wait timeout (1205) rolled it back, a Galera node
// outside the primary component refused its statement (1047, notReady), or the driver
// found its connection closed before it sent anything (driver.ErrBadConn: the server
// had closed it, as a proxy does when it fails over). A connection lost during the
// transaction leaves its outcome unknown (the driver's "invalid connection", an EOF):
// that is the caller's to resolve, by the store's contract, not retried here.
func retryable(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1213 || me.Number == 1205 || me.Number == 1047
	}
	return errors.Is(err, errRetry) || errors.Is(err, driver.ErrBadConn)
}

// notReady reports whether err is a Galera node refusing a statement because it is not
// in the primary component (it lost quorum, or is still joining): ERROR 1047 "WSREP has
// not yet prepared node for application use". The node answers every statement so but
// SET and SHOW, BEGIN and COMMIT included, before running it: the transaction never
// began, or never committed. Other nodes may form the primary component meanwhile; the
// connection stays on the node that cannot serve it.
func notReady(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1047
}

// dropIdle closes the idle connections of the pool Open made, after a node refused a
// statement for want of a primary component (notReady): they reach that node too, and
// new ones are routed anew (by a proxy whose check has passed to another node). A pool
// given to New is the caller's, and keeps its connections: only the one that met the
// refusal in a transaction of run's is closed (attempt).
func (s *Store) dropIdle() {
	if !s.own {
		return
	}
	s.db.SetMaxIdleConns(0) // closes every idle connection
	s.db.SetMaxIdleConns(maxIdleConns)
}

// run runs f in one READ COMMITTED transaction, trying again with jittered backoff on
// a deadlock or a lock wait timeout. When n > 0 it first reserves n sequence numbers
// (see allocSeq) and passes the first; the transaction releases the hold as it commits.
//
// On Galera a deadlock is also how a transaction that lost certification to another
// node's fails, and the node may not yet have applied the write-set that won: a retry
// then first waits, by causalSQL on its connection, until the node has applied every
// write-set the cluster committed before, so that the new attempt reads what beat the
// last one. The first attempt does not wait.
func (s *Store) run(ctx context.Context, op string, n int, f func(tx *sql.Tx, seq int64) error) error {
	if err := s.check(op); err != nil {
		return err
	}
	var lo int64
	if n > 0 {
		var err error
		if lo, err = s.allocSeq(ctx, n); err != nil {
			return s.wrap(op, err)
		}
	}
	committed := false
	defer func() {
		if n > 0 && !committed {
			s.dropHold(ctx, lo)
		}
	}()
	for attempt := 1; ; attempt++ {
		err := s.attempt(ctx, n, &lo, s.galera && attempt > 1, f)
		if err == nil {
			committed = true
			return nil
		}
		if notReady(err) {
			s.dropIdle()
		}
		if !retryable(err) || attempt == maxAttempts || ctx.Err() != nil {
			if errors.Is(err, errRetry) {
				err = fmt.Errorf("gave up after %d attempts", attempt)
			}
			return s.wrap(op, err)
		}
		backoff := time.Duration(1<<min(attempt, 6)) * time.Millisecond
		backoff += rand.N(backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return s.wrap(op, ctx.Err())
		}
	}
}

// causalSQL waits, before it runs, until the node has applied every write-set the
// Galera cluster committed before it (wsrep_sync_wait, for this statement only). The
// server skips the wait inside a transaction: it runs on its own, before BEGIN.
const causalSQL = `SET STATEMENT wsrep_sync_wait = 1 FOR SELECT 1`

// attempt runs f in one transaction, on a connection of its own: when causal, one that
// has first waited, by causalSQL, for its node to catch up with the cluster. A
// connection whose node refused the transaction for want of a primary component
// (notReady) is closed rather than returned to the pool.
func (s *Store) attempt(ctx context.Context, n int, lo *int64, causal bool, f func(tx *sql.Tx, seq int64) error) (err error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() { releaseConn(conn, err) }() // last, once the transaction has ended
	if causal {
		if _, err := conn.ExecContext(ctx, causalSQL); err != nil {
			return err
		}
	}
	tx, err := conn.BeginTx(ctx, s.txOpts)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after the commit; on a panic in f, the rollback
	if n > 0 {
		ok, err := takeHold(ctx, tx, *lo)
		if err == nil && !ok {
			// A refill took our range for abandoned (we were paused beyond HoldGrace):
			// those numbers may already lie behind a cursor. Take fresh ones.
			tx.Rollback()
			if *lo, err = s.allocSeq(ctx, n); err != nil {
				return err
			}
			return errRetry
		}
		if err != nil {
			return err
		}
	}
	if s.galera {
		defer s.forgetFence(tx)
	}
	if err := f(tx, *lo); err != nil {
		return err
	}
	if s.galera {
		if err := s.fenceAtCommit(ctx, tx); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// releaseConn returns conn to the pool, or closes it when err says its node refused it
// for want of a primary component (notReady): a new connection may reach another node.
func releaseConn(conn *sql.Conn, err error) {
	if notReady(err) {
		// Raw closes the connection when its function returns driver.ErrBadConn.
		conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	conn.Close()
}

// allocSeq reserves n sequence numbers in a short transaction of its own and records
// them as held (ax_seq_holds) in the same commit, so that no reader sees the counter
// move without the hold. It returns the first number.
func (s *Store) allocSeq(ctx context.Context, n int) (int64, error) {
	for attempt := 1; ; attempt++ {
		lo, err := s.allocSeqOnce(ctx, n)
		if err == nil || !retryable(err) || attempt == maxAttempts {
			return lo, err
		}
		time.Sleep(time.Duration(attempt) * time.Millisecond)
	}
}

func (s *Store) allocSeqOnce(ctx context.Context, n int) (int64, error) {
	tx, err := s.db.BeginTx(ctx, s.txOpts)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE ax_counters SET value = LAST_INSERT_ID(value + ?) WHERE name = 'seq'`, n)
	if err != nil {
		return 0, err
	}
	hi, err := res.LastInsertId()
	if err != nil {
		return 0, err
	}
	lo := hi - int64(n) + 1
	if _, err := tx.ExecContext(ctx, `INSERT INTO ax_seq_holds (lo, hi, created_at) VALUES (?, ?, UTC_TIMESTAMP(6))`, lo, hi); err != nil {
		return 0, err
	}
	return lo, tx.Commit()
}

// takeHold deletes the hold starting at lo inside tx: the row stays locked by tx, so
// readers see the range as in use until tx commits (the range is then visible with the
// rows) or rolls back (the hold comes back, unlocked). It reports false when the hold
// is gone: a refill reaped it as abandoned.
func takeHold(ctx context.Context, tx *sql.Tx, lo int64) (bool, error) {
	res, err := tx.ExecContext(ctx, `DELETE FROM ax_seq_holds WHERE lo = ?`, lo)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// dropHold releases a hold whose transaction did not commit, best effort: a hold left
// behind only delays the refill cursor by HoldGrace.
func (s *Store) dropHold(ctx context.Context, lo int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	s.db.ExecContext(ctx, `DELETE FROM ax_seq_holds WHERE lo = ?`, lo)
}

// wrap maps driver errors onto the store's sentinels and prefixes the operation.
func (s *Store) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if notReady(err) {
		s.dropIdle() // every read and write passes here: none leaves the pool on that node
	}
	var me *mysql.MySQLError
	switch {
	case errors.Is(err, sql.ErrConnDone) || strings.Contains(err.Error(), "sql: database is closed"):
		err = fmt.Errorf("%w (%v)", store.ErrClosed, err)
	case errors.As(err, &me):
		switch me.Number {
		case 1062:
			err = fmt.Errorf("%w: %v", store.ErrDuplicate, err)
		case 1048, 1264, 1292, 1366, 1406, 1265:
			err = fmt.Errorf("%w: %v", store.ErrInvalid, err)
		}
	}
	return fmt.Errorf("ax: mysql: %s: %w", op, err)
}

// Times travel as "YYYY-MM-DD hh:mm:ss.ffffff" strings in UTC, whatever the DSN's loc.
const timeLayout = "2006-01-02 15:04:05.000000"

var (
	minTime = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
)

func dt(t time.Time) string { return t.UTC().Format(timeLayout) }

// nullTime is a time as a query argument: NULL for the zero time.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return dt(t)
}

// inRange reports whether t fits a DATETIME column (years 1000-9999).
func inRange(t time.Time) bool { return !t.Before(minTime) && !t.After(maxTime) }

// nullPayload is a payload as a query argument: NULL for nil.
func nullPayload(p []byte) any {
	if p == nil {
		return nil
	}
	return p
}

// nullString is a trace context as it is bound: NULL when there is none (see
// migrations/0011_trace.sql).
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// clamp brings t into DATETIME's range.
func clamp(t time.Time) time.Time {
	if t.Before(minTime) {
		return minTime
	}
	if t.After(maxTime) {
		return maxTime
	}
	return t
}

// dbTime scans a DATETIME(6) into a UTC time.Time whether the driver parses times
// (parseTime=true: the wall clock is read as UTC) or not (bytes); NULL is the zero time.
type dbTime struct{ t *time.Time }

func (d dbTime) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		*d.t = time.Time{}
	case time.Time:
		*d.t = time.Date(x.Year(), x.Month(), x.Day(), x.Hour(), x.Minute(), x.Second(), x.Nanosecond(), time.UTC)
	case []byte:
		return d.parse(string(x))
	case string:
		return d.parse(x)
	default:
		return fmt.Errorf("cannot scan %T into a time", v)
	}
	return nil
}

func (d dbTime) parse(s string) error {
	t, err := time.ParseInLocation("2006-01-02 15:04:05.999999", s, time.UTC)
	if err != nil {
		return err
	}
	*d.t = t
	return nil
}

// nullText scans a text column that may be NULL, which it reads as "". Queries read
// the task key and overlap policy through NULLIF, NULL when empty: the driver boxes
// every non-NULL value it reads, so an empty string would cost an allocation per row
// of every task without a key, and NULL costs none.
type nullText struct{ s *string }

// Scan implements sql.Scanner.
func (n nullText) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		*n.s = ""
	case []byte:
		*n.s = string(x)
	case string:
		*n.s = x
	default:
		return fmt.Errorf("cannot scan %T into a string", v)
	}
	return nil
}

// taskColumns are the columns scanTask reads, in its order.
const taskColumns = "id, name, `key`, payload, status, due_at, attempt, max_retry, dispatch_retries, " +
	"execution_id, owner_service, last_error, timeout_us, backoff, " +
	"created_at, updated_at, dispatched_at, started_at, heartbeat_at, finished_at, triggered_at, NULLIF(task_key, ''), NULLIF(overlap, ''), payload IS NOT NULL, " +
	"key_hold, key_until, key_slot <> 0, snoozes, cancelled_by, cancel_requested_at, trace"

type scanner interface{ Scan(dest ...any) error }

// withColumn is a row whose last column, after those its reader scans, goes to dest.
type withColumn struct {
	row  scanner
	dest any
}

func (w withColumn) Scan(dest ...any) error { return w.row.Scan(append(dest, w.dest)...) }

func scanTask(row scanner, extra ...any) (*store.Task, error) {
	var r taskRow
	t := new(store.Task)
	if err := r.scan(row, t, extra...); err != nil {
		return nil, err
	}
	return t, nil
}

// taskRow is a row of taskColumns being read: driverkit.TaskRow, the rest scanned
// straight into the task (dbTime, nullText).
type taskRow struct {
	driverkit.TaskRow
	dest []any
}

// scan reads a row of taskColumns into t, then the extra destinations: the same for
// every row a taskRow scans.
func (r *taskRow) scan(row scanner, t *store.Task, extra ...any) error {
	if r.dest == nil {
		k := &r.Task
		r.dest = append([]any{&k.ID, &k.Name, &k.Key, &r.Payload, &r.Status, dbTime{&k.DueAt}, &k.Attempt, &k.MaxRetry, &k.DispatchRetries,
			&r.ExecID, &k.OwnerService, &k.LastError, &r.Timeout, &r.Backoff,
			dbTime{&k.CreatedAt}, dbTime{&k.UpdatedAt}, dbTime{&k.DispatchedAt}, dbTime{&k.StartedAt},
			dbTime{&k.HeartbeatAt}, dbTime{&k.FinishedAt}, dbTime{&k.TriggeredAt}, nullText{&k.TaskKey}, nullText{(*string)(&k.Overlap)}, &r.HasPayload,
			(*string)(&k.KeyHold), dbTime{&k.KeyUntil}, &k.Superseded, &k.Snoozes, &k.CancelledBy, dbTime{&k.CancelRequestedAt}, nullText{&k.Trace}},
			extra...)
	}
	if err := row.Scan(r.dest...); err != nil {
		return err
	}
	return r.Fill(t)
}

// scanTasks reads the tasks rows returns, about n of them, and closes rows: read in
// place, in one allocation when there are no more than n.
func scanTasks(rows *sql.Rows, n int) ([]store.Task, error) {
	defer rows.Close()
	var r taskRow
	var out []store.Task
	for rows.Next() {
		if out == nil {
			out = make([]store.Task, 0, max(n, 1))
		}
		out = append(out, store.Task{})
		if err := r.scan(rows, &out[len(out)-1]); err != nil {
			return nil, err
		}
	}
	return out, rows.Err() // nil when there are none
}

const executionColumns = `id, task_id, attempt, node, status, due_at, claimed_at, started_at, heartbeat_at, finished_at, error`

func scanExecution(row scanner) (*store.Execution, error) {
	var (
		e      store.Execution
		status string
	)
	if err := row.Scan(&e.ID, &e.TaskID, &e.Attempt, &e.Node, &status, dbTime{&e.DueAt}, dbTime{&e.ClaimedAt},
		dbTime{&e.StartedAt}, dbTime{&e.HeartbeatAt}, dbTime{&e.FinishedAt}, &e.Error); err != nil {
		return nil, err
	}
	e.Status = store.Status(status)
	return &e, nil
}

// marks returns "?,?,…": n placeholders.
// deleteSelected deletes from table, in tx, the rows whose ids query returns (a
// SELECT id … LIMIT … FOR UPDATE), and returns how many. MySQL allows no LIMIT in an
// IN subquery: the ids are read first, in the same transaction.
func deleteSelected(ctx context.Context, tx *sql.Tx, table, query string, args ...any) (int, error) {
	ids, err := taskquery.ScanIDs(tx.QueryContext(ctx, query, args...))
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE id IN (`+marks(len(ids))+`)`, ids...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

func marks(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// caseID returns "CASE id WHEN ? THEN ? … ELSE els END" and its arguments; the ids
// are task ids or execution ids.
func caseID[ID any](ids []ID, vals []any, els string) (string, []any) {
	var b strings.Builder
	args := make([]any, 0, 2*len(ids))
	b.WriteString("CASE id")
	for i, id := range ids {
		b.WriteString(" WHEN ? THEN ?")
		args = append(args, id, vals[i])
	}
	if els != "" {
		b.WriteString(" ELSE " + els)
	}
	b.WriteString(" END")
	return b.String(), args
}

func int64s(ids []int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// SchemaStatus reports the schema version of the DSN's database (0: not migrated;
// a migration interrupted half-way counts as not applied) and the latest this
// package knows, without changing anything.
func SchemaStatus(ctx context.Context, dsn string) (have, want int, err error) {
	want = SchemaVersion()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return 0, want, fmt.Errorf("ax: mysql: schema status: %w", err)
	}
	defer db.Close()
	var exists int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name = 'ax_schema_migrations'`).Scan(&exists); err != nil {
		return 0, want, fmt.Errorf("ax: mysql: schema status: %w", err)
	}
	if exists == 0 {
		return 0, want, nil
	}
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM ax_schema_migrations WHERE applied_at IS NOT NULL`).Scan(&have); err != nil {
		return 0, want, fmt.Errorf("ax: mysql: schema status: %w", err)
	}
	return have, want, nil
}
