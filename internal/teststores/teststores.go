// Package teststores opens a fresh store of each durable kind for a test: SQLite in
// the test's temporary directory, PostgreSQL and MySQL/MariaDB in a schema or
// database of the test's own (internal/servicetest: skipped when the server is
// unreachable, failed under AX_REQUIRE_SERVICES=1). Each is closed when the test
// ends.
package teststores

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/mysql"
	"github.com/axsched/ax/store/postgres"
	"github.com/axsched/ax/store/sqlite"
)

// Durable opens a fresh store of each kind, by the kind's name: sqlite, postgres,
// mysql.
var Durable = map[string]func(t testing.TB) store.Store{
	"sqlite": func(t testing.TB) store.Store { return SQLite(t) },
	"postgres": func(t testing.TB) store.Store {
		return opened(t, func() (store.Store, error) { return postgres.Open(context.Background(), servicetest.PostgresDSN(t)) })
	},
	"mysql": func(t testing.TB) store.Store {
		return opened(t, func() (store.Store, error) { return mysql.Open(servicetest.MySQLDSN(t)) })
	},
}

// SQLite opens a fresh SQLite store in t's temporary directory.
func SQLite(t testing.TB) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "ax.db"))
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// opened returns the store open opens, closed when t ends.
func opened(t testing.TB, open func() (store.Store, error)) store.Store {
	t.Helper()
	st, err := open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
