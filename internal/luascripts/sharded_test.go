package luascripts

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// anyPublish matches a call of PUBLISH however it is written (redis.call or
// redis.pcall, either quotes, any case), SPUBLISH aside.
var anyPublish = regexp.MustCompile(`(?i)redis\.p?call\(\s*['"]publish['"]`)

// TestSharded_everyPublishingScript fails when a .lua file that publishes
// is part of no script of the publishing table, or when a variant still
// publishes classically.
func TestSharded_everyPublishingScript(t *testing.T) {
	files, err := filepath.Glob("*.lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("no .lua files: %v", err)
	}
	found := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		body := string(b)
		if !anyPublish.MatchString(body) {
			continue
		}
		if f == "forcerelease.lua" {
			// Stays classic on purpose: it also publishes on the Client's
			// per-prefix inbox channel, which is in no key's slot, so it
			// cannot SPUBLISH there; see classicOnly in sharded.go.
			continue
		}
		found++
		covered := false
		for _, p := range publishing {
			if strings.Contains(p.src, body) {
				covered = true
			}
		}
		if !covered {
			t.Errorf("%s publishes but no script of the publishing table contains it", f)
		}
	}
	if found == 0 {
		t.Fatal("no .lua file publishes: the check looks for the wrong text")
	}
	for _, p := range publishing {
		v := Sharded(p.s)
		if v == p.s {
			t.Errorf("script %s has no variant", p.s.Hash())
		}
		src := ShardedText(p.src)
		if anyPublish.MatchString(src) {
			t.Errorf("variant of %s still publishes classically:\n%s", p.s.Hash(), src)
		}
		if !strings.Contains(src, shardedPublish) {
			t.Errorf("variant of %s has no SPUBLISH", p.s.Hash())
		}
		if ShardedText(p.s.Hash()) != v.Hash() || ShardedSource(p.src) != src {
			t.Errorf("variant of %s: SHA and text disagree", p.s.Hash())
		}
	}
	if Sharded(Acquire) != Acquire || ShardedText(acquireSrc) != acquireSrc {
		t.Error("a script that does not publish got a variant")
	}
}
