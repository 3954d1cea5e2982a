package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
)

// Func is one function of a file and its length.
type Func struct {
	Pos   token.Position // where its func keyword is
	Name  string         // Name, or (Recv).Name for a method
	Lines int            // from the func keyword's line to the closing brace's, both counted
}

// String formats f as file:line name N lines.
func (f Func) String() string {
	return fmt.Sprintf("%s:%d %s %d lines", f.Pos.Filename, f.Pos.Line, f.Name, f.Lines)
}

// Funcs returns the functions and methods declared in the Go file at path,
// function literals excluded (they count within their function).
func Funcs(path string) ([]Func, error) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []Func
	for _, decl := range file.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
		out = append(out, Func{Pos: start, Name: name(fn), Lines: end.Line - start.Line + 1})
	}
	return out, nil
}

// name is fn's name, with its receiver's type for a method.
func name(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	star := ""
	if s, ok := t.(*ast.StarExpr); ok {
		star, t = "*", s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if ix, ok := t.(*ast.IndexListExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return "(" + star + id.Name + ")." + fn.Name.Name
	}
	return fn.Name.Name
}
