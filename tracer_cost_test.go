package ax

import (
	"context"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/axsched/ax/store/memory"
)

// Without a Tracer, tracing costs the submit path no allocation and the executor
// nothing at all: it is given no hook to call.
func TestNoTracerCostsNothing(t *testing.T) {
	st := memory.New()
	defer st.Close()
	s, err := New(Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.WithValue(context.Background(), struct{}{}, "a request")
	if n := testing.AllocsPerRun(100, func() { _ = s.traceOf(ctx) }); n != 0 {
		t.Errorf("traceOf without a Tracer: %v allocations, want 0", n)
	}
	if s.spanStarter() != nil {
		t.Error("spanStarter without a Tracer is not nil: the executor would call it for every execution")
	}
}

// Package ax, and every package of the module it imports, imports no tracing library:
// a service that does not trace does not even build one in.
func TestNoTracingLibraryInTheCore(t *testing.T) {
	const module = "github.com/axsched/ax"
	seen := map[string]bool{}
	var visit func(pkg string)
	visit = func(pkg string) {
		if seen[pkg] {
			return
		}
		seen[pkg] = true
		dir := filepath.Join(".", strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/"))
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("package %s: no Go files in %s (%v)", pkg, dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range file.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				switch {
				case strings.HasPrefix(path, "go.opentelemetry.io/"):
					t.Errorf("%s imports %s", f, path)
				case path == module || strings.HasPrefix(path, module+"/"):
					visit(path)
				}
			}
		}
	}
	visit(module)
	if !seen[module+"/store"] {
		t.Fatalf("the walk missed package store: %v", seen)
	}
}
