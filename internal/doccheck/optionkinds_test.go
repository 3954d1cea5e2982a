package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// kindColumns maps the kinds of optionkinds.go to the columns of the
// guide's options table.
var kindColumns = map[string]string{
	"kindMutex": "Mutex", "kindReentrant": "Re-entrant", "kindFair": "Fair",
	"kindRW": "Read-write", "kindPermit": "Semaphore", "kindMulti": "Multi-lock", "kindOnce": "Once",
	"kindElection": "Election",
	"kindLimiter":  "Limiter",
}

// TestGuideOptionKindsMatchCode: each row of docs/guide.md's options table
// marks with — exactly the kinds that optionRules in optionkinds.go lists
// in the option's notFor, and ✓ the others.
func TestGuideOptionKindsMatchCode(t *testing.T) {
	root := repoRoot(t)
	notFor := optionRulesNotFor(t, filepath.Join(root, "optionkinds.go"))
	guide, err := os.ReadFile(filepath.Join(root, "docs", "guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	var header []string
	rows := 0
	for line := range strings.Lines(string(guide)) {
		cells := tableCells(line)
		if len(cells) > 0 && cells[0] == "Option" {
			header = cells
			continue
		}
		m := optionRow.FindStringSubmatch(line)
		if m == nil || header == nil {
			continue
		}
		rows++
		refused, known := notFor[m[1]]
		if !known {
			t.Errorf("%s: no rule in optionRules", m[1])
			continue
		}
		for i, col := range header {
			if i >= len(cells) || !isKindColumn(col) {
				continue
			}
			want := "✓"
			if refused[col] {
				want = "—"
			}
			if cells[i] != want {
				t.Errorf("%s, %s: the guide says %q, optionRules says %q", m[1], col, cells[i], want)
			}
		}
	}
	if rows != len(notFor) {
		t.Errorf("the guide's table has %d option rows, optionRules %d rules", rows, len(notFor))
	}
}

func isKindColumn(col string) bool {
	for _, c := range kindColumns {
		if c == col {
			return true
		}
	}
	return false
}

// tableCells splits a Markdown table row into its trimmed cells; nil for
// a line that is not a row.
func tableCells(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") {
		return nil
	}
	cells := strings.Split(line[1:len(line)-1], "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

// optionRulesNotFor reads optionRules from optionkinds.go: for each rule's
// name, the table columns of the kinds in its notFor.
func optionRulesNotFor(t *testing.T, path string) map[string]map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]ast.Expr{}
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.VAR {
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						vars[n.Name] = vs.Values[i]
					}
				}
			}
		}
	}
	lit, ok := vars["optionRules"].(*ast.CompositeLit)
	if !ok {
		t.Fatal("optionkinds.go: no composite literal optionRules")
	}
	out := map[string]map[string]bool{}
	for _, e := range lit.Elts {
		rule, ok := e.(*ast.CompositeLit)
		if !ok {
			t.Fatalf("optionRules: element %T, want a composite literal", e)
		}
		name, refused := "", map[string]bool{}
		for _, field := range rule.Elts {
			kv := field.(*ast.KeyValueExpr)
			switch kv.Key.(*ast.Ident).Name {
			case "name":
				name, _ = strconv.Unquote(kv.Value.(*ast.BasicLit).Value)
			case "notFor":
				addKinds(t, kv.Value, vars, refused)
			}
		}
		out[name] = refused
	}
	return out
}

// addKinds adds to set the columns of the kinds x names: kinds(...) calls,
// their unions with |, and variables holding either.
func addKinds(t *testing.T, x ast.Expr, vars map[string]ast.Expr, set map[string]bool) {
	t.Helper()
	switch e := x.(type) {
	case *ast.CallExpr:
		for _, a := range e.Args {
			col, ok := kindColumns[a.(*ast.Ident).Name]
			if !ok {
				t.Fatalf("optionkinds.go: unknown kind %s", a.(*ast.Ident).Name)
			}
			set[col] = true
		}
	case *ast.BinaryExpr:
		addKinds(t, e.X, vars, set)
		addKinds(t, e.Y, vars, set)
	case *ast.ParenExpr:
		addKinds(t, e.X, vars, set)
	case *ast.Ident:
		v, ok := vars[e.Name]
		if !ok {
			t.Fatalf("optionkinds.go: notFor names %s, not a variable of the file", e.Name)
		}
		addKinds(t, v, vars, set)
	default:
		t.Fatalf("optionkinds.go: notFor expression %T not understood", x)
	}
}
