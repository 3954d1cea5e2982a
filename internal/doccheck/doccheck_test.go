// Package doccheck holds the tests that check the repository's docs and
// godoc against the code. It reads the sources; it imports none.
package doccheck

import (
	"go/ast"
	"go/token"
	"sort"
	"strings"
	"testing"
)

// TestExportedNamesHaveDocComments walks every non-test Go file of every
// module in the repository (the root, extra/*, bench, internal/faulttest)
// and fails for each exported function, method of an exported type, type,
// constant, variable or struct field without a comment saying what it is.
// A constant or variable in a documented group, and a field with a comment
// on its line, count as documented.
func TestExportedNamesHaveDocComments(t *testing.T) {
	var missing []string
	walkGo(t, skipHidden, func(rel string, _ *token.FileSet, f *ast.File) {
		for _, name := range undocumented(f) {
			missing = append(missing, rel+": "+name)
		}
	})
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("no doc comment: %s", m)
	}
}

// skipHidden reports whether a directory named name is hidden or testdata.
func skipHidden(_, name string) bool {
	return strings.HasPrefix(name, ".") || name == "testdata"
}

// undocumented returns the exported names of f that lack a doc comment.
func undocumented(f *ast.File) []string {
	var out []string
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || d.Doc != nil {
				continue
			}
			if d.Recv != nil {
				recv := receiverType(d.Recv.List[0].Type)
				if !ast.IsExported(recv) {
					continue // a method of an unexported type is not in the docs
				}
				out = append(out, recv+"."+d.Name.Name)
				continue
			}
			out = append(out, d.Name.Name)
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					if s.Doc == nil && d.Doc == nil {
						out = append(out, s.Name.Name)
					}
					out = append(out, undocumentedFields(s)...)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() && s.Doc == nil && s.Comment == nil && d.Doc == nil {
							out = append(out, n.Name)
						}
					}
				}
			}
		}
	}
	return out
}

// undocumentedFields returns the exported fields of an exported struct
// type with neither a doc comment nor a comment on their line.
func undocumentedFields(s *ast.TypeSpec) []string {
	st, ok := s.Type.(*ast.StructType)
	if !ok {
		return nil
	}
	var out []string
	for _, fld := range st.Fields.List {
		if fld.Doc != nil || fld.Comment != nil {
			continue
		}
		for _, n := range fld.Names {
			if n.IsExported() {
				out = append(out, s.Name.Name+"."+n.Name)
			}
		}
	}
	return out
}

// receiverType is the name of a method's receiver type, without its
// pointer or type parameters.
func receiverType(x ast.Expr) string {
	for {
		switch t := x.(type) {
		case *ast.StarExpr:
			x = t.X
		case *ast.IndexExpr:
			x = t.X
		case *ast.IndexListExpr:
			x = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}
