package lock_test

import (
	"fmt"
	"testing"

	"github.com/agentlock/lock"
)

// TestLossReason_String pins the name of every reason, and of a value that
// is none of them; error messages and metric labels carry these names.
func TestLossReason_String(t *testing.T) {
	t.Parallel()
	want := map[lock.LossReason]string{
		lock.LossStolen:        "stolen",
		lock.LossExpired:       "expired",
		lock.LossForceReleased: "force-released",
		lock.LossUnreachable:   "unreachable",
		lock.LossMaxHold:       "max hold reached",
		lock.LossUnanswered:    "unanswered",
		lock.LossVanished:      "vanished",
		lock.LossReason(0):     "LossReason(0)",
		lock.LossReason(99):    "LossReason(99)",
	}
	checkStrings(t, want)
	if got := fmt.Sprint(lock.LossStolen); got != "stolen" {
		t.Errorf("fmt.Sprint(LossStolen) = %q, want stolen", got)
	}
}
