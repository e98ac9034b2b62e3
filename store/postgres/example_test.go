package postgres_test

import (
	"context"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/axsched/ax/store/postgres"
)

// A pool of the application's, shared with ax: PoolConfig builds its configuration so
// that a COMMIT cut past its grace is not cancelled (see "When the server fails over"
// in the package doc).
func ExampleNew() {
	ctx := context.Background()
	cfg, err := postgres.PoolConfig("postgres://app@db.internal:5432/app?search_path=jobs")
	if err != nil {
		log.Fatal(err)
	}
	cfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	st, err := postgres.New(pool)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	// ax.New(st, …), and the application's own queries on pool.
}
