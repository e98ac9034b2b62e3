package mysql_test

import (
	"testing"

	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/mysql"
)

// TestMigrateNameLimitsInstantly: migration 14 adds ax_names.concurrency instantly
// (ALGORITHM = INSTANT, which fails rather than rebuild the table), and a name paused
// before it reads paused, without a limit.
func TestMigrateNameLimitsInstantly(t *testing.T) {
	t.Parallel()
	dsn := servicetest.MySQLDSN(t)
	db := rawDB(t, dsn)
	const limits = 14 // 0014_name_limits.sql
	if err := mysql.MigrateTo(db, limits-1); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO ax_names (namespace, name, paused, changed_by, changed_at)
		VALUES ('default', 'report', TRUE, 'alice', UTC_TIMESTAMP(6))`); err != nil {
		t.Fatal(err)
	}
	stmts := mysql.Statements(mustRead(t, "migrations/0014_name_limits.sql"), collation(t, db))
	for _, q := range stmts {
		if _, err := db.Exec(q + ", ALGORITHM = INSTANT"); err != nil {
			t.Fatalf("%v:\n%s", err, q)
		}
	}
	if _, err := db.Exec(`INSERT INTO ax_schema_migrations (version, step, started_at, applied_at)
		VALUES (?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`, limits, len(stmts)); err != nil {
		t.Fatal(err)
	}
	s := openDSN(t, dsn)
	ctx := t.Context()
	names, err := s.Names(ctx)
	if err != nil || len(names) != 1 || !names[0].Paused || names[0].Concurrency != 0 || names[0].ChangedBy != "alice" {
		t.Fatalf("Names = %+v, %v; want report paused by alice, no limit", names, err)
	}
	st, err := s.SetConcurrency(ctx, "report", 4, "bob")
	if err != nil || !st.Paused || st.Concurrency != 4 || st.ChangedBy != "bob" {
		t.Errorf("SetConcurrency = %+v, %v; want report paused, limited to 4, by bob", st, err)
	}
}

// SetConcurrency of no limit writes no row for a name never stored, and answers its
// zero state; on a limited name it lifts the limit and records who did.
func TestSetConcurrencyZero(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := t.Context()
	st, err := s.SetConcurrency(ctx, "fresh", 0, "alice")
	if err != nil || *st != (store.NameState{Name: "fresh"}) {
		t.Errorf("SetConcurrency(fresh, 0) = %+v, %v; want the zero state of fresh", st, err)
	}
	if names, err := s.Names(ctx); err != nil || len(names) != 0 {
		t.Errorf("Names = %+v, %v; want none", names, err)
	}
	if _, err := s.SetConcurrency(ctx, "report", 3, "alice"); err != nil {
		t.Fatal(err)
	}
	st, err = s.SetConcurrency(ctx, "report", 0, "bob")
	if err != nil || st.Concurrency != 0 || st.ChangedBy != "bob" || st.ChangedAt.IsZero() {
		t.Errorf("SetConcurrency(report, 0) = %+v, %v; want no limit, by bob", st, err)
	}
	if names, err := s.Names(ctx); err != nil || len(names) != 1 || names[0].Concurrency != 0 {
		t.Errorf("Names = %+v, %v; want report, no limit", names, err)
	}
}
