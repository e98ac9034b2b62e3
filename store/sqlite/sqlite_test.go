package sqlite_test

import (
	"database/sql"
	"errors"
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

func TestMigrations(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ax.db")
	if _, _, err := sqlite.SchemaStatus(path); err == nil {
		t.Errorf("SchemaStatus of a missing file: no error")
	}
	// Several openers at once migrate exactly once.
	errs := make(chan error, 5)
	for range 5 {
		go func() {
			s, err := sqlite.Open(path)
			if err == nil {
				err = s.Close()
			}
			errs <- err
		}()
	}
	for range 5 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent Open: %v", err)
		}
	}
	have, want, err := sqlite.SchemaStatus(path)
	if err != nil || have != want || want != sqlite.SchemaVersion() {
		t.Fatalf("SchemaStatus = %d, %d, %v; want %d, %d", have, want, err, sqlite.SchemaVersion(), sqlite.SchemaVersion())
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows int
	if err := db.QueryRow(`SELECT count(*) FROM ax_schema_migrations`).Scan(&rows); err != nil || rows != want {
		t.Errorf("%d migration rows (%v), want %d: applied once each", rows, err, want)
	}
	// Re-opening is a no-op; a newer schema is refused.
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatalf("re-open: %v", err)
	}
	s.Close()
	if _, err := db.Exec(`INSERT INTO ax_schema_migrations (version, applied_at) VALUES (999, 0)`); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.Open(path); !errors.Is(err, store.ErrSchemaVersion) {
		t.Errorf("Open of a newer schema: %v, want ErrSchemaVersion", err)
	}
}
