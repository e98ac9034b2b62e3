package postgres_test

import (
	"context"
	"testing"

	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/postgres"
	"github.com/axsched/ax/store/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t)
	})
}

// TestBulkInsert runs the suite's inserts through COPY (copy.go), whatever their size.
func TestBulkInsert(t *testing.T) {
	storetest.RunInsert(t, func(t *testing.T) store.Store {
		st := open(t)
		postgres.SetCopyThreshold(st, 1)
		return st
	})
}

// open returns a fresh store on its own schema, closed when the test ends.
func open(t *testing.T) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), servicetest.PostgresDSN(t))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { st.Close() }) // ErrClosed when the test closed it already
	return st
}
