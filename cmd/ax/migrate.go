package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
)

// runMigrate is `ax migrate up|status`.
func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	storeName := fs.String("store", "sqlite", "store `KIND`: "+storeNames()+" (default: the DSN's kind)")
	dsn := fs.String("dsn", "", "the database: a file path for sqlite, a DSN otherwise")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: ax migrate up|status --store KIND --dsn DSN

  up      apply the migrations the database lacks (under a lock: safe while other
          processes start) and print the schema version
  status  print the database's schema version and the latest this ax knows,
          changing nothing; exit status 1 when migrations are pending

flags:
`)
		fs.PrintDefaults()
	}
	if len(args) > 0 && isHelp(args[0]) {
		code, _ := parseFlags(fs, args[:1], stdout, stderr)
		return code
	}
	switch {
	case len(args) == 0:
		fmt.Fprintf(stderr, "ax migrate: missing action: want up or status\n\n")
		fs.Usage()
		return exitUsage
	case strings.HasPrefix(args[0], "-"):
		fmt.Fprintf(stderr, "ax migrate: the action (up or status) comes first, before the flags; got %q\n\n", args[0])
		fs.Usage()
		return exitUsage
	case args[0] != "up" && args[0] != "status":
		fmt.Fprintf(stderr, "ax migrate: unknown action %q: want up or status\n\n", args[0])
		fs.Usage()
		return exitUsage
	}
	action := args[0]
	if code, ok := parseFlags(fs, args[1:], stdout, stderr); !ok {
		return code
	}
	if *dsn == "" {
		fmt.Fprintf(stderr, "ax migrate: --dsn is required\n")
		return exitUsage
	}
	name, kind, d, err := storeFor(fs, *storeName, *dsn)
	if err != nil {
		fmt.Fprintf(stderr, "ax migrate: %v\n", err)
		return exitUsage
	}
	*storeName, *dsn = name, d
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
	switch {
	case have == want:
		fmt.Fprintf(stdout, "%s: schema version %d, up to date\n", *storeName, have)
		return exitOK
	case have > want:
		fmt.Fprintf(stdout, "%s: schema version %d is newer than this ax knows (%d): a newer ax migrated it; upgrade this one\n", *storeName, have, want)
		return exitFail
	}
	fmt.Fprintf(stdout, "%s: schema version %d, latest %d: %d migration(s) pending\n", *storeName, have, want, want-have)
	return exitFail
}
