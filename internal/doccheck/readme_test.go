package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goBlock matches a fenced Go block of a Markdown file; group 1 is its body.
var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

// TestREADMEExamplesAreExamples: every Go block of README.md is a run of
// consecutive lines of one Example function of the root package (blank
// lines and indentation aside), so the README shows code that compiles
// and whose output `go test` checks.
func TestREADMEExamplesAreExamples(t *testing.T) {
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	examples := exampleBodies(t, root)
	blocks := goBlock.FindAllSubmatch(readme, -1)
	if len(blocks) < 6 {
		t.Fatalf("README.md has %d Go blocks, want at least one per kind (6)", len(blocks))
	}
	for _, b := range blocks {
		lines := codeLines(string(b[1]))
		if len(lines) == 1 && strings.HasPrefix(lines[0], "import ") {
			continue // the import line of the install section
		}
		if !anyContainsRun(examples, lines) {
			t.Errorf("README.md block is in no Example function:\n%s", b[1])
		}
	}
}

// exampleBodies returns the lines (see codeLines) of the body of every
// Example function in the root package's test files, keyed by name.
func exampleBodies(t *testing.T, root string) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	fset := token.NewFileSet()
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Example") || fn.Body == nil {
				continue
			}
			body := src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset]
			out[fn.Name.Name] = codeLines(string(body))
		}
	}
	if len(out) == 0 {
		t.Fatal("no Example functions found in the root package")
	}
	return out
}

// codeLines splits code into its non-blank lines, each trimmed of
// surrounding white space.
func codeLines(code string) []string {
	var out []string
	for line := range strings.Lines(code) {
		if l := strings.TrimSpace(line); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// anyContainsRun reports whether some value of bodies holds want as
// consecutive elements.
func anyContainsRun(bodies map[string][]string, want []string) bool {
	for _, body := range bodies {
		for i := 0; i+len(want) <= len(body); i++ {
			if equalLines(body[i:i+len(want)], want) {
				return true
			}
		}
	}
	return false
}

func equalLines(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// repoRoot is the repository's root directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}
