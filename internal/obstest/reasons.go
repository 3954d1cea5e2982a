package obstest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/agentlock/lock"
)

// LossReasons returns every [lock.LossReason] the code declares, read
// from the source rather than listed by hand, so that a reason added
// later is checked by every test that ranges over them: the constants of
// type lock.LossReason in the root package's losterror.go. Each is checked to
// name the engine's reason of the same name, whose value its const block
// (internal/lease/errors.go, iota from 1) gives.
func LossReasons(t testing.TB) []lock.LossReason {
	t.Helper()
	engine := leaseReasons(t)
	var out []lock.LossReason
	for _, spec := range constSpecs(t, SourcePath(t, "losterror.go")) {
		if !isIdent(spec.Type, "LossReason") {
			continue
		}
		sel, ok := singleValue(spec).(*ast.SelectorExpr)
		name := spec.Names[0].Name
		if !ok || !isIdent(sel.X, "lease") || sel.Sel.Name != name {
			t.Fatalf("losterror.go: %s is not LossReason = lease.%s", name, name)
		}
		v, ok := engine[name]
		if !ok {
			t.Fatalf("losterror.go: %s has no reason in internal/lease/errors.go", name)
		}
		out = append(out, lock.LossReason(v))
	}
	if len(out) != len(engine) {
		t.Fatalf("losterror.go declares %d loss reasons, internal/lease %d", len(out), len(engine))
	}
	return out
}

// SourcePath is the path of rel, a file of the root module.
func SourcePath(t testing.TB, rel string) string {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("obstest: no source path")
	}
	return filepath.Join(filepath.Dir(self), "..", "..", filepath.FromSlash(rel))
}

// ReadSource returns the text of rel, a file of the root module.
func ReadSource(t testing.TB, rel string) string {
	t.Helper()
	b, err := os.ReadFile(SourcePath(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// leaseReasons maps each engine reason (internal/lease/errors.go: the
// const block of type Reason starting at iota + 1) to its value.
func leaseReasons(t testing.TB) map[string]int {
	t.Helper()
	out := map[string]int{}
	in := false
	for _, spec := range constSpecs(t, SourcePath(t, "internal/lease/errors.go")) {
		switch {
		case isIdent(spec.Type, "Reason"):
			if b, ok := singleValue(spec).(*ast.BinaryExpr); !ok || !isIdent(b.X, "iota") {
				t.Fatalf("internal/lease/errors.go: Reason block starts with %s, want iota + 1", spec.Names[0].Name)
			}
			in = true
		case spec.Type != nil || len(spec.Values) > 0:
			in = false // the next const with a value of its own ends the block
		}
		if in {
			out[spec.Names[0].Name] = len(out) + 1
		}
	}
	if len(out) == 0 {
		t.Fatal("internal/lease/errors.go: no const block of type Reason")
	}
	return out
}

// constSpecs returns the specs of every const declaration in file, in order.
func constSpecs(t testing.TB, file string) []*ast.ValueSpec {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []*ast.ValueSpec
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			out = append(out, s.(*ast.ValueSpec))
		}
	}
	return out
}

func singleValue(s *ast.ValueSpec) ast.Expr {
	if len(s.Names) != 1 || len(s.Values) != 1 {
		return nil
	}
	return s.Values[0]
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
