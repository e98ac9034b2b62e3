package main

import (
	"context"
	"flag"
	"fmt"
	"io"
)

// runMigrate is `ax migrate up|status`.
func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	storeName := fs.String("store", "sqlite", "store `KIND`: "+storeNames())
	dsn := fs.String("dsn", "", "the database: a file path for sqlite, a DSN otherwise")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: ax migrate up|status --store KIND --dsn DSN

  up      apply the migrations the database lacks (under a lock: safe while other
          processes start) and print the schema version
  status  print the database's schema version and the latest this ax knows,
          changing nothing; exit status 1 when migrations are pending

flags:
`)
		fs.PrintDefaults()
	}
	if len(args) == 0 || (args[0] != "up" && args[0] != "status") {
		fs.Usage()
		return exitUsage
	}
	action := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return exitUsage
	}
	kind, err := lookupStore(*storeName)
	if err != nil || *dsn == "" {
		if err == nil {
			err = fmt.Errorf("--dsn is required")
		}
		fmt.Fprintf(stderr, "ax migrate: %v\n", err)
		return exitUsage
	}
	if action == "up" {
		st, err := kind.open(ctx, *dsn)
		if err != nil {
			fmt.Fprintf(stderr, "ax migrate up: %v\n", err)
			return exitFail
		}
		st.Close()
	}
	have, want, err := kind.status(ctx, *dsn)
	if err != nil {
		fmt.Fprintf(stderr, "ax migrate %s: %v\n", action, err)
		return exitFail
	}
	if have == want {
		fmt.Fprintf(stdout, "%s: schema version %d, up to date\n", *storeName, have)
		return exitOK
	}
	fmt.Fprintf(stdout, "%s: schema version %d, latest %d: %d migration(s) pending\n", *storeName, have, want, want-have)
	return exitFail
}
