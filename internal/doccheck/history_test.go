package doccheck

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// historyRef matches what says where text came from rather than what is:
// an issue, session or iteration number, a "#12" reference, or a commit
// hash (7 to 40 hex digits with a letter and a digit, not part of a UUID
// or a longer word; the letter and digit are checked by isHash).
var (
	historyRef = regexp.MustCompile(`(?i)\b(issues?|sessions?|iterations?|sprints?)[ -]#?\d+\b|(^|[\s(])#\d+\b|\bcommit\s+\x60?[0-9a-f]{7,40}\b`)
	hexWord    = regexp.MustCompile(`(^|[^\w-])([0-9a-f]{7,40})([^\w-]|$)`)
)

// historyHits returns the matches of historyRef and the hash-like words of
// text, one "line N: match" each.
func historyHits(text string) []string {
	var out []string
	n := 0
	for line := range strings.Lines(text) {
		n++
		for _, m := range historyRef.FindAllString(line, -1) {
			out = append(out, lineRef(n, strings.TrimSpace(m)))
		}
		for _, m := range hexWord.FindAllStringSubmatch(line, -1) {
			if isHash(m[2]) {
				out = append(out, lineRef(n, m[2]))
			}
		}
	}
	return out
}

// isHash reports whether a hex word has both a letter and a digit, as a
// commit hash nearly always does and a decimal figure or a word never does.
func isHash(w string) bool {
	return strings.ContainsAny(w, "abcdef") && strings.ContainsAny(w, "0123456789")
}

func lineRef(n int, m string) string {
	return "line " + itoa(n) + ": " + m
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// TestDocsSayWhatIs: README.md, CHANGELOG.md and every page under docs/
// carry no issue, session or iteration numbers and no commit hashes.
func TestDocsSayWhatIs(t *testing.T) {
	root := repoRoot(t)
	files := []string{filepath.Join(root, "README.md"), filepath.Join(root, "CHANGELOG.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		for _, hit := range historyHits(string(text)) {
			t.Errorf("%s %s", rel, hit)
		}
	}
}

// TestGodocSaysWhatIs: the comments of every non-test Go file in the
// repository carry no issue, session or iteration numbers and no commit
// hashes.
func TestGodocSaysWhatIs(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, cg := range f.Comments {
			line := fset.Position(cg.Pos()).Line
			for _, hit := range historyHits(cg.Text()) {
				t.Errorf("%s (comment at line %d) %s", rel, line, hit)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
