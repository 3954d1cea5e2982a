package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// maxDocLines is the longest doc comment an exported name may carry. Godoc
// states the contract; wire formats, measurements and reasoning belong in
// docs/design, linked with a "See docs/…" line.
const maxDocLines = 15

// TestExportedDocCommentsAreShort walks the library packages (the root,
// admin, redlock, locktest and extra/*; not internal/, bench, commands or
// examples) and fails for each exported function, method of an exported
// type, type, constant or variable whose doc comment runs over maxDocLines
// lines. In a parenthesised group the group's comment and each spec's own
// comment count apart. Package comments are exempt.
func TestExportedDocCommentsAreShort(t *testing.T) {
	var long []string
	walkGo(t, skipForDocLength, func(rel string, fset *token.FileSet, f *ast.File) {
		for _, name := range longDocs(fset, f, maxDocLines) {
			long = append(long, rel+": "+name)
		}
	})
	sort.Strings(long)
	for _, l := range long {
		t.Errorf("doc comment over %d lines: %s", maxDocLines, l)
	}
}

// docsRef matches a page of docs/ named in a comment, with its #fragment.
var docsRef = regexp.MustCompile(`\bdocs/[\w./-]+\.md(#[\w-]+)?`)

// TestGodocDocsReferencesResolve: every "docs/….md#fragment" that a comment
// of the library packages names is a page of the repository, and its
// fragment one of that page's headings, so a "See docs/…" line moved out
// of a doc comment leads where it says.
func TestGodocDocsReferencesResolve(t *testing.T) {
	root := repoRoot(t)
	n := 0
	walkGo(t, skipForDocLength, func(rel string, fset *token.FileSet, f *ast.File) {
		for _, cg := range f.Comments {
			for _, ref := range docsRef.FindAllString(cg.Text(), -1) {
				n++
				if msg := checkLink(filepath.Join(root, "README.md"), ref); msg != "" {
					t.Errorf("%s:%d: %s: %s", rel, fset.Position(cg.Pos()).Line, ref, msg)
				}
			}
		}
	})
	if n == 0 {
		t.Fatal("no docs/ references found in godoc")
	}
}

// walkGo parses every non-test Go file of the repository outside the
// directories skip names (given each one's path relative to the root and
// its name), and calls fn with its relative path, packages main left out:
// a command exports nothing to users.
func walkGo(t *testing.T, skip func(rel, name string) bool, fn func(rel string, fset *token.FileSet, f *ast.File)) {
	t.Helper()
	root := repoRoot(t)
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if path != root && skip(rel, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if f.Name.Name != "main" {
			fn(rel, fset, f)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// skipForDocLength reports whether the directory rel (named name) holds no
// library package: hidden directories, testdata, internal, bench, cmd and
// examples.
func skipForDocLength(rel, name string) bool {
	if skipHidden(rel, name) {
		return true
	}
	switch filepath.ToSlash(rel) {
	case "internal", "bench", "cmd", "examples":
		return true
	}
	return false
}

// longDocs returns the exported names of f, with their line counts, whose
// doc comment has more than max lines.
func longDocs(fset *token.FileSet, f *ast.File, max int) []string {
	var out []string
	check := func(name string, doc *ast.CommentGroup) {
		if doc == nil {
			return
		}
		n := fset.Position(doc.End()).Line - fset.Position(doc.Pos()).Line + 1
		if n > max {
			out = append(out, fmt.Sprintf("%s (%d lines)", name, n))
		}
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv == nil {
				check(d.Name.Name, d.Doc)
				continue
			}
			if recv := receiverType(d.Recv.List[0].Type); ast.IsExported(recv) {
				check(recv+"."+d.Name.Name, d.Doc)
			}
		case *ast.GenDecl:
			checkGenDecl(d, check)
		}
	}
	return out
}

// checkGenDecl calls check for the comments of the exported types,
// constants and variables declared by d: the group's comment once (named
// by its first exported name) and each spec's own comment.
func checkGenDecl(d *ast.GenDecl, check func(string, *ast.CommentGroup)) {
	groupName := ""
	for _, spec := range d.Specs {
		switch s := spec.(type) {
		case *ast.TypeSpec:
			if s.Name.IsExported() {
				check(s.Name.Name, s.Doc)
				if groupName == "" {
					groupName = s.Name.Name
				}
			}
		case *ast.ValueSpec:
			for _, n := range s.Names {
				if n.IsExported() {
					check(n.Name, s.Doc)
					if groupName == "" {
						groupName = n.Name
					}
					break
				}
			}
		}
	}
	if groupName != "" {
		check(groupName, d.Doc)
	}
}
