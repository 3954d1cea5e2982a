package lock_test

import (
	"testing"

	"github.com/agentlock/lock"
)

// TestEventKind_String pins the name of every kind of event, and of a
// value that is none of them; metric labels carry these names.
func TestEventKind_String(t *testing.T) {
	t.Parallel()
	want := map[lock.EventKind]string{
		lock.EventAcquireStart:  "acquire_start",
		lock.EventAcquire:       "acquire",
		lock.EventRelease:       "release",
		lock.EventExtend:        "extend",
		lock.EventRenewalFailed: "renewal_failed",
		lock.EventLost:          "lost",
		lock.EventAttemptFailed: "attempt_failed",
		lock.EventRenewed:       "renewed",
		lock.EventWithLock:      "with_lock",
		lock.EventFallback:      "fallback",
		lock.EventKind(0):       "event_0",
		lock.EventKind(99):      "event_99",
	}
	checkStrings(t, want)
}

// checkStrings fails for each value of want whose String is not its name.
func checkStrings[K interface {
	~int
	String() string
}](t *testing.T, want map[K]string) {
	t.Helper()
	for k, w := range want {
		if got := k.String(); got != w {
			t.Errorf("%T(%d).String() = %q, want %q", k, int(k), got, w)
		}
	}
}
