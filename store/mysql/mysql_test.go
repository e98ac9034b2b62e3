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
	s, err := mysql.Open(servicetest.MySQLDSN(t))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() }) // ErrClosed when the test closed it already
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t) })
}
