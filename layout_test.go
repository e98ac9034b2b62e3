package ax_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The README's Layout lists every package of the module, each once, and nothing
// else: a package added or removed without its line fails here.
func TestReadmeLayoutListsEveryPackage(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "## Layout\n\n```\n")
	block, _, ok2 := strings.Cut(after, "```")
	if !ok || !ok2 {
		t.Fatal("the README has no Layout block")
	}
	entry := regexp.MustCompile(`^(\S+(?: \(root\))?)\s{2,}`)
	var listed []string
	for line := range strings.SplitSeq(block, "\n") {
		m := entry.FindStringSubmatch(line)
		if m == nil {
			continue // a continuation line, or blank
		}
		name := m[1]
		if name == "ax (root)" {
			name = "."
		}
		if slices.Contains(listed, name) {
			t.Errorf("the Layout lists %s twice", name)
		}
		listed = append(listed, name)
	}

	var pkgs []string // folders with Go files other than tests, but the separate bench module and testdata
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if base := d.Name(); path != "." && (base == "testdata" || strings.HasPrefix(base, ".") || path == "bench") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			if dir := filepath.ToSlash(filepath.Dir(path)); !slices.Contains(pkgs, dir) {
				pkgs = append(pkgs, dir)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		if !slices.Contains(listed, p) {
			t.Errorf("package %s is not in the README's Layout", p)
		}
	}
	for _, l := range listed {
		if !slices.Contains(pkgs, l) {
			t.Errorf("the README's Layout lists %s, which is no package", l)
		}
	}
}
