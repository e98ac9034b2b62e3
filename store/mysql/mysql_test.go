package mysql_test

import (
	"testing"

	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/mysql"
	"github.com/axsched/ax/store/storetest"
)

// open returns a store on a fresh database of the test server.
func open(t *testing.T) *mysql.Store {
	t.Helper()
	return openDSN(t, servicetest.MySQLDSN(t))
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t) })
}

// TestInsertReadBack runs the suite's inserts through MySQL's path, which reads the
// rows written back by their keys, on MariaDB, whose inserts take them from INSERT …
// RETURNING.
func TestInsertReadBack(t *testing.T) {
	storetest.RunInsert(t, func(t *testing.T) store.Store {
		s := open(t)
		mysql.ReadBack(s)
		return s
	})
}
