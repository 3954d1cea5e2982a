package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

var (
	// releaseHeading matches a CHANGELOG section of a release: "## v1.2.3".
	releaseHeading = regexp.MustCompile(`(?m)^## (v\d+\.\d+\.\d+)\s*$`)
	// requireCore matches a go.mod's requirement of the root module.
	requireCore = regexp.MustCompile(`(?m)^\s*(?:require\s+)?github\.com/agentlock/lock (\S+)`)
)

// TestPublishedModulesRequireARelease: locktest and each extra/ module,
// which users add with go get, require the root module at the newest
// release CHANGELOG.md names, not a placeholder pseudo-version that no
// module proxy serves. (Their replace directive serves this repository's
// root to the tests; a user's build ignores it.)
func TestPublishedModulesRequireARelease(t *testing.T) {
	root := repoRoot(t)
	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := releaseHeading.FindSubmatch(changelog)
	if m == nil {
		t.Fatal("CHANGELOG.md has no release heading such as \"## v0.1.0\"")
	}
	latest := string(m[1])
	mods, _ := filepath.Glob(filepath.Join(root, "extra", "*", "go.mod"))
	mods = append(mods, filepath.Join(root, "locktest", "go.mod"))
	for _, p := range mods {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		r := requireCore.FindSubmatch(b)
		if r == nil {
			t.Errorf("%s: no requirement of github.com/agentlock/lock", p)
			continue
		}
		if got := string(r[1]); got != latest {
			t.Errorf("%s requires github.com/agentlock/lock %s, want %s, the newest release in CHANGELOG.md", p, got, latest)
		}
	}
}
