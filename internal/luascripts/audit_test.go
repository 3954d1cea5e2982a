package luascripts

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestAudited: every script with an audited variant keeps its whole text
// (or, for ForceRelease, its body after holds.lua) inside audit_body, and
// a publishing script's audited variant has a sharded variant of its own.
func TestAudited(t *testing.T) {
	srcs := map[*redis.Script]string{OnceAcquire: OnceAcquireSrc, OnceStore: OnceStoreSrc, ForceRelease: forceReleaseBody}
	for i, s := range All {
		srcs[s] = Sources[i]
	}
	for i, s := range SemAll {
		srcs[s] = SemSources[i]
	}
	for i, s := range RWAll {
		srcs[s] = RWSources[i]
	}
	n := 0
	for s, src := range srcs {
		a, text := Audited(s)
		if a == nil {
			continue
		}
		n++
		if !strings.Contains(text, "local function audit_body()\n"+src+"\nend\n") || a.Hash() == s.Hash() {
			t.Fatalf("audited variant of %s does not wrap its text", s.Hash())
		}
		if publishes := strings.Contains(src, classicPublish); publishes && s != ForceRelease {
			if v := Sharded(a); v == a || !strings.Contains(ShardedText(text), shardedPublish) || ShardedText(a.Hash()) != v.Hash() {
				t.Fatalf("audited variant of %s has no sharded variant", s.Hash())
			}
		}
	}
	// acquire, release, extend, handoff of the mutex, the semaphore's and
	// the read-write lock's (but their TTLs), Once's two, ForceRelease.
	if want := 4 + 4 + 3 + 2 + 1; n != want {
		t.Fatalf("%d scripts have an audited variant, want %d", n, want)
	}
	if a, _ := Audited(PTTL); a != nil {
		t.Fatal("PTTL has an audited variant: a TTL writes no entry")
	}
}

// TestAuditArgs: the audit's KEY goes last in KEYS, after the hook's; its
// ARGVs after the script's, their count last; the caller's slices are not
// written to.
func TestAuditArgs(t *testing.T) {
	k := NewKeys("p:", "k")
	keys := k.AcquireKeys()
	args := []any{"tok", 10}
	e := &AuditEntry{Max: 100, Key: "k", Token: "t", Fence: 7, Owner: "o", Host: "h", PID: "1", Metadata: "m"}
	gotK, gotA := AuditArgs(keys, args, "s", e, []string{"x"}, "w")
	if strings.Join(gotK, " ") != "p:{k} p:{k}:fence x s" {
		t.Fatalf("keys = %v", gotK)
	}
	want := []any{"tok", 10, int64(100), "k", "t", "7", "o", "h", "1", "m", "w", 9}
	if len(gotA) != len(want) {
		t.Fatalf("args = %v, want %v", gotA, want)
	}
	for i := range want {
		if gotA[i] != want[i] {
			t.Fatalf("args = %v, want %v", gotA, want)
		}
	}
	if k.Notify() != "p:{k}:notify" || len(args) != 2 {
		t.Fatal("AuditArgs wrote to the caller's slices")
	}
}
