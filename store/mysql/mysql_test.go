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
