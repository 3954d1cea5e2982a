package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// optionRow matches a row of the guide's options table: its first cell
// names one option, as "`WithX(...)`".
var optionRow = regexp.MustCompile("(?m)^\\| `(With[A-Za-z]+)\\(")

// TestGuideOptionsTable: docs/guide.md's options table has one row for
// each exported With* function of the root package, and no row that names
// no such function.
func TestGuideOptionsTable(t *testing.T) {
	root := repoRoot(t)
	guide, err := os.ReadFile(filepath.Join(root, "docs", "guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]int{}
	for _, m := range optionRow.FindAllSubmatch(guide, -1) {
		rows[string(m[1])]++
	}
	code := rootOptionFuncs(t, root)
	for _, name := range code {
		switch rows[name] {
		case 0:
			t.Errorf("docs/guide.md: option %s has no row in the options table", name)
		case 1:
		default:
			t.Errorf("docs/guide.md: option %s has %d rows, want 1", name, rows[name])
		}
		delete(rows, name)
	}
	for name := range rows {
		t.Errorf("docs/guide.md: the options table's row %s names no exported function of the root package", name)
	}
}

// rootOptionFuncs returns the exported functions (not methods) of the root
// package whose names start with "With", sorted.
func rootOptionFuncs(t *testing.T, root string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if ok && fn.Recv == nil && fn.Name.IsExported() && strings.HasPrefix(fn.Name.Name, "With") {
				out = append(out, fn.Name.Name)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no With* functions found in the root package")
	}
	sort.Strings(out)
	return out
}
