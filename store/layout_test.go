package store_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/axsched/ax/store"
)

// methodFiles names the file that holds each method of the contract in every driver,
// so that a method is found under one name whatever the driver. "DRIVER" is the
// driver's own file: memory.go, sqlite.go, postgres.go, mysql.go.
var methodFiles = map[string]string{
	"Now": "DRIVER", "InNamespace": "DRIVER", "Close": "DRIVER",

	"Insert": "insert.go",

	"Get": "read.go", "Lookup": "read.go", "Executions": "read.go",
	"Tasks": "query.go", "CountTasks": "query.go", "TaskStats": "read.go",

	"Cancel": "operate.go", "Reschedule": "operate.go", "Retry": "operate.go",
	"Trigger": "operate.go", "MakeDue": "operate.go",

	"Claim": "claim.go", "ClaimStart": "claim.go",

	"Refill": "refill.go",

	"Start": "execution.go", "Heartbeat": "execution.go", "Finish": "execution.go",
	"Requeue": "execution.go", "Stale": "execution.go",

	"RegisterSchedules": "schedules.go", "Schedules": "schedules.go",
	"PauseSchedule": "schedules.go", "ResumeSchedule": "schedules.go",
	"DeleteSchedule": "schedules.go", "FireSchedule": "schedules.go",

	"PauseName": "names.go", "ResumeName": "names.go", "SetConcurrency": "names.go", "SetRate": "names.go", "SetKeyConcurrency": "names.go", "SetKeyRate": "names.go", "Names": "names.go",
	"PruneKeyStarts": "names.go",

	"SlotGaps": "slots.go", "TasksByKeys": "slots.go", "TasksByKeyRange": "slots.go",
	"PruneSlotGaps": "slots.go",

	"RaiseFence": "fence.go",

	"EndLeadership": "leadership.go", "LeadershipHistory": "leadership.go",
	"PruneLeadership": "leadership.go",

	"AcquireLease": "lease.go", "RenewLease": "lease.go", "ReleaseLease": "lease.go",
	"Lease": "lease.go",

	"RegisterNode": "nodes.go", "Nodes": "nodes.go", "RemoveNode": "nodes.go",
	"ExpireNodes": "nodes.go",

	"Audit": "audit.go", "AuditLog": "audit.go", "PruneAudit": "audit.go",

	"WriteStats": "stats.go", "Stats": "stats.go", "PruneStats": "stats.go",

	"Prune": "prune.go",

	"Bind": "tx.go", "InTx": "tx.go",

	"Listen": "notify.go", "Marked": "notify.go",
}

var drivers = []string{"memory", "sqlite", "postgres", "mysql"}

// methodNames returns the names of the methods of the interfaces in ifaces.
func methodNames(ifaces ...reflect.Type) map[string]bool {
	names := make(map[string]bool)
	for _, it := range ifaces {
		for m := range it.Methods() {
			names[m.Name] = true
		}
	}
	return names
}

// TestDriverLayout: every driver declares each method of the contract (store.Store,
// store.Transactor, store.Notifier, store.Marker) on its *Store in the file methodFiles names, and
// the methods of its bound view (store.Tx) in tx.go, so that a reader who knows one
// driver finds a method in any other.
func TestDriverLayout(t *testing.T) {
	t.Parallel()
	storeMethods := methodNames(reflect.TypeFor[store.Store]())
	contract := methodNames(reflect.TypeFor[store.Store](), reflect.TypeFor[store.Transactor](), reflect.TypeFor[store.Notifier](), reflect.TypeFor[store.Marker]())
	txMethods := methodNames(reflect.TypeFor[store.Tx]())
	for name := range contract {
		if _, ok := methodFiles[name]; !ok {
			t.Errorf("method %s of the contract has no file in methodFiles", name)
		}
	}

	for _, driver := range drivers {
		found := make(map[string]bool)
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, driver, func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, pkg := range pkgs {
			for path, f := range pkg.Files {
				file := filepath.Base(path)
				for _, d := range f.Decls {
					fd, ok := d.(*ast.FuncDecl)
					if !ok || fd.Recv == nil {
						continue
					}
					name, recv := fd.Name.Name, receiverType(fd)
					switch {
					case recv == "Store" && contract[name]:
						found[name] = true
						want := methodFiles[name]
						if want == "DRIVER" {
							want = driver + ".go"
						}
						if file != want {
							t.Errorf("%s: (*Store).%s is in %s, want %s", driver, name, file, want)
						}
					case recv != "Store" && txMethods[name] && file != "tx.go":
						t.Errorf("%s: (%s).%s of the bound view is in %s, want tx.go", driver, recv, name, file)
					}
				}
			}
		}
		for name := range storeMethods {
			if !found[name] {
				t.Errorf("%s: no method (*Store).%s found", driver, name)
			}
		}
	}
}

// receiverType returns the name of fd's receiver type, without its pointer.
func receiverType(fd *ast.FuncDecl) string {
	typ := fd.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
