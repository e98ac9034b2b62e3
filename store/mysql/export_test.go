package mysql

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/axsched/ax/store"
)

// Applied reports how many migrations the New behind s applied.
func Applied(s *Store) int { return s.applied }

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
