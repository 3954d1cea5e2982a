package faulttest

import "testing"

// TestProcess_multiHolderKilled SIGKILLs a worker process holding a
// multi-lock over three keys: every member comes free by its TTL, and a
// multi-lock over the same keys waiting here gets all of them, each with a
// fence above the killed hold's.
func TestProcess_multiHolderKilled(t *testing.T) {
	holderKilled(t, "multi_holder_killed", multiKind("mk-a", "mk-b", "mk-c"))
}

// TestProcess_multiHolderPaused SIGSTOPs a worker process holding a
// multi-lock over three keys for twice the TTL; a multi-lock here takes
// them and writes to each; the resumed worker's late write to every member
// carries its old fences and each is rejected.
func TestProcess_multiHolderPaused(t *testing.T) {
	holderPaused(t, "multi_holder_paused", multiKind("mp-a", "mp-b", "mp-c"))
}
