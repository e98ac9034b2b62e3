package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/sqlite"
	"github.com/axsched/ax/store/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "ax.db"))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { s.Close() }) // ErrClosed when the test closed it already
		return s
	})
}
