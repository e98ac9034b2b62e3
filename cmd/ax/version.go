package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/axsched/ax/store/mysql"
	"github.com/axsched/ax/store/postgres"
	"github.com/axsched/ax/store/sqlite"
)

// runVersion is `ax version`: the module's version (or the commit it was built
// from), the Go version, and the schema version each store migrates to.
func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: ax version\n\nPrints the version of ax, of Go, and the schema version of each store.\n")
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	version, commit, goVersion := "(unknown)", "", "(unknown)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		version, goVersion = bi.Main.Version, bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					commit += " (modified)"
				}
			}
		}
	}
	fmt.Fprintf(stdout, "ax %s\n", version)
	if commit != "" {
		fmt.Fprintf(stdout, "commit %s\n", commit)
	}
	fmt.Fprintf(stdout, "go %s\n", goVersion)
	fmt.Fprintf(stdout, "schema: sqlite %d, postgres %d, mysql %d\n", sqlite.SchemaVersion(), postgres.SchemaVersion(), mysql.SchemaVersion())
	return exitOK
}
