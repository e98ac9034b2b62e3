// Command ax is the command-line tool of the ax scheduler.
//
//	ax demo [flags]                 close unpaid orders after a timeout and reconcile payments every 2s, on embedded SQLite;
//	                                --nodes 3: three replicas, the leader killed and another taking over
//	ax migrate up|status [flags]    apply or show the schema migrations of a store
//	ax bench [flags]                run an end-to-end workload against a store, from an empty schema
//	ax serve --dsn DSN [flags]      serve the admin API and /metrics: an operations node (AX_DSN, AX_ADMIN_TOKENS …)
//	ax tasks list|show|cancel|retry|trigger|reschedule [flags]
//	                                find and act on tasks through an admin API (--server, AX_TOKEN)
//	ax schedules list|pause|resume  the schedules, through an admin API
//	ax version                      print the version of ax, of Go, and each store's schema version
//
// Run `ax help` for the list of commands and `ax help COMMAND` for a command's flags.
// The exit status is 0 on success (and after `ax help` or --help, whose usage goes
// to stdout), 1 when a command fails and 2 on a usage error. Where a command takes
// --store and it is absent, the store kind is the DSN's: postgres:// for PostgreSQL,
// mysql:// or user@tcp(host:port)/db for MySQL, a file path for SQLite.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
