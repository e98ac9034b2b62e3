package main

import (
	"context"
	"fmt"
	"io"
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
		}
		usage(stderr)
		return exitUsage
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
