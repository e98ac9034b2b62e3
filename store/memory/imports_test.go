package memory_test

import (
	"go/build"
	"slices"
	"strings"
	"testing"
)

// The memory store is written from package store's documentation alone: of the
// module, its non-test files import package store and nothing else.
func TestImportsOnlyStore(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	const module, allowed = "github.com/axsched/ax", "github.com/axsched/ax/store"
	if !slices.Contains(pkg.Imports, allowed) {
		t.Fatalf("memory's imports %v lack %s: the wrong directory was read", pkg.Imports, allowed)
	}
	for _, imp := range pkg.Imports {
		if (imp == module || strings.HasPrefix(imp, module+"/")) && imp != allowed {
			t.Errorf("memory imports %s: of the module, only %s may be imported", imp, allowed)
		}
	}
}
