package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	// mdLink matches the target of a Markdown link: "](target)".
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// mdHeading matches a heading line; group 2 is its text.
	mdHeading = regexp.MustCompile(`^(#+) (.*)$`)
	// notAnchor is what GitHub drops from a heading to make its anchor.
	notAnchor = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
)

// TestDocLinksResolve: every relative link of README.md, CHANGELOG.md and
// the pages under docs/ names a file or directory of the repository, and
// a link's #fragment into a Markdown page names one of its headings.
func TestDocLinksResolve(t *testing.T) {
	root := repoRoot(t)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	design, _ := filepath.Glob(filepath.Join(root, "docs", "design", "*.md"))
	pages = append(append(pages, design...), filepath.Join(root, "README.md"), filepath.Join(root, "CHANGELOG.md"))
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		for _, m := range mdLink.FindAllStringSubmatch(string(text), -1) {
			if msg := checkLink(page, m[1]); msg != "" {
				t.Errorf("%s: link %s: %s", rel, m[1], msg)
			}
		}
	}
}

// checkLink returns what is wrong with target, a link found in page, or
// "" when it resolves. Absolute URLs are not checked.
func checkLink(page, target string) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	path, frag, _ := strings.Cut(target, "#")
	file := page
	if path != "" {
		file = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
	}
	if _, err := os.Stat(file); err != nil {
		return "no such file"
	}
	if frag == "" || !strings.HasSuffix(file, ".md") {
		return ""
	}
	text, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	if !headingAnchors(string(text))[frag] {
		return "no heading with that anchor"
	}
	return ""
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown page, fenced code left out: lower case, punctuation dropped,
// spaces as hyphens, and "-1", "-2"… on repeats.
func headingAnchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		m := mdHeading.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		a := strings.ReplaceAll(notAnchor.ReplaceAllString(strings.ToLower(strings.TrimSpace(m[2])), ""), " ", "-")
		if n, dup := seen[a]; dup {
			seen[a] = n + 1
			a += "-" + itoa(n+1)
		} else {
			seen[a] = 0
		}
		out[a] = true
	}
	return out
}
