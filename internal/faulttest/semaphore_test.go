package faulttest

import "testing"

// TestProcess_permitHolderPaused: TestProcess_holderPaused on the one permit
// of a semaphore of 1. A worker process holding it is SIGSTOPped for twice
// the TTL; a holder here gets the permit once the paused one's expiry has
// passed on the server's clock, and writes to the fenced store; the
// resumed worker's late write with its old fence is rejected and its
// Lost() fires.
func TestProcess_permitHolderPaused(t *testing.T) { holderPaused(t, "permit_holder_paused", 1) }
