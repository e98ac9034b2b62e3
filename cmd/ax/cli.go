package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
)

// Exit statuses of the ax command.
const (
	exitOK    = 0 // the command succeeded
	exitFail  = 1 // the command ran and failed
	exitUsage = 2 // bad command line, or help was asked for
)

// command is one subcommand of ax. run gets the arguments after the command's name
// and returns the exit status; it parses its own flags with a flag.FlagSet whose
// output is stderr.
type command struct {
	name    string
	summary string // one line for the usage
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands lists the subcommands in the order the usage shows them.
var commands = []command{
	{name: "demo", summary: "close unpaid orders after a timeout and reconcile payments every 2s, on embedded SQLite", run: runDemo},
	{name: "migrate", summary: "apply or show the schema migrations of a store", run: runMigrate},
	{name: "bench", summary: "run an end-to-end workload (throughput, lateness, idle cost) against a store, from an empty schema", run: runBench},
	{name: "serve", summary: "serve the admin API and /metrics for a store: an operations node, which runs no handlers", run: runServe},
	{name: "tasks", summary: "find tasks and act on them (cancel, retry, trigger, reschedule) through an admin API (--server, AX_TOKEN)", run: runTasks},
	{name: "schedules", summary: "list, pause, resume and trigger schedules through an admin API (--server, AX_TOKEN)", run: runSchedules},
	{name: "names", summary: "list, pause and resume task names through an admin API (--server, AX_TOKEN)", run: runNames},
	{name: "version", summary: "print the version of ax, of Go, and the schema version of each store", run: runVersion},
}

// run dispatches args (without the program name) to a subcommand and returns the
// exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 {
			if c, ok := lookup(rest[0]); ok {
				return c.run(ctx, []string{"-h"}, stdout, stderr)
			}
			fmt.Fprintf(stderr, "ax help: unknown command %q\n\n", rest[0])
			usage(stderr)
			return exitUsage
		}
		usage(stdout) // asked for: the answer, not an error
		return exitOK
	}
	c, ok := lookup(name)
	if !ok {
		fmt.Fprintf(stderr, "ax: unknown command %q\n\n", name)
		usage(stderr)
		return exitUsage
	}
	return c.run(ctx, rest, stdout, stderr)
}

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func usage(w io.Writer) {
	var b strings.Builder
	b.WriteString("ax is an embeddable, persistent task scheduler. This is its command-line tool.\n\n")
	b.WriteString("usage: ax COMMAND [flags]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-8s %s\n", c.name, c.summary)
	}
	b.WriteString("\nRun 'ax help COMMAND' for a command's flags.\n")
	io.WriteString(w, b.String())
}

// isHelp reports whether arg asks for a command's help.
func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// parseFlags parses args into fs, whose output is stderr. It returns ok when the
// command goes on; otherwise the exit status: 0 after -h or --help, whose usage goes
// to stdout, 2 after a bad flag or an argument left over (extra arguments are errors),
// with the flag package's message and the usage on stderr.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	var out bytes.Buffer
	fs.SetOutput(&out)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		fs.SetOutput(stderr)
		return exitOK, false
	case err != nil:
		io.Copy(stderr, &out)
		return exitUsage, false
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "ax %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return exitUsage, false
	}
	return 0, true
}

// storeFor resolves the store a command opens: the kind --store names, or, when
// --store is absent, the kind the DSN says — postgres:// or postgresql:// for
// PostgreSQL, mysql:// (turned into the driver's form) or a go-sql-driver DSN
// (user@tcp(host:port)/db) for MySQL, anything else a file path for SQLite — and the
// DSN to open it with.
func storeFor(fs *flag.FlagSet, kindName, dsn string) (string, storeKind, string, error) {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "store" })
	if !given && dsn != "" {
		kindName, dsn = kindOfDSN(dsn)
	}
	kind, err := lookupStore(kindName)
	return kindName, kind, dsn, err
}

// kindOfDSN is the store kind a DSN names, and the DSN as that store opens it.
func kindOfDSN(dsn string) (string, string) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return "postgres", dsn
	case strings.HasPrefix(dsn, "mysql://"):
		u, err := url.Parse(dsn)
		if err != nil {
			return "mysql", dsn // the driver says what is wrong with it
		}
		auth := u.User.Username()
		if pw, ok := u.User.Password(); ok {
			auth += ":" + pw
		}
		if auth != "" {
			auth += "@"
		}
		out := auth + "tcp(" + u.Host + ")" + u.Path
		if u.RawQuery != "" {
			out += "?" + u.RawQuery
		}
		return "mysql", out
	case strings.Contains(dsn, "@tcp(") || strings.Contains(dsn, "@unix(") || strings.Contains(dsn, "@/"):
		return "mysql", dsn
	}
	return "sqlite", dsn
}
