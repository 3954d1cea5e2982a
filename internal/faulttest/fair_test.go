package faulttest

import "testing"

// TestProcess_fairHolderKilled: TestProcess_holderKilled on a fair lock,
// whose waiter here waits in the key's queue.
func TestProcess_fairHolderKilled(t *testing.T) {
	holderKilled(t, "fair_holder_killed", fairKind("fair-killed"))
}

// TestProcess_fairHolderPaused: TestProcess_holderPaused on a fair lock.
func TestProcess_fairHolderPaused(t *testing.T) {
	holderPaused(t, "fair_holder_paused", fairKind("fair-paused"))
}
