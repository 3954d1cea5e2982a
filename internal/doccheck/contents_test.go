package doccheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocPagesStartWithContents: every page under docs/ has a table of
// contents as its first section ("## Contents"). TestDocLinksResolve
// checks that its entries name headings of the page.
func TestDocPagesStartWithContents(t *testing.T) {
	root := repoRoot(t)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	design, _ := filepath.Glob(filepath.Join(root, "docs", "design", "*.md"))
	pages = append(pages, design...)
	if len(pages) == 0 {
		t.Fatal("no pages under docs/")
	}
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		first := ""
		for line := range strings.Lines(string(text)) {
			if strings.HasPrefix(line, "## ") {
				first = strings.TrimSpace(line)
				break
			}
		}
		if first != "## Contents" {
			t.Errorf("%s: first section is %q, want \"## Contents\"", rel, first)
		}
	}
}
