package lock_test

import (
	"sync/atomic"
	"testing"

	"github.com/agentlock/lock"
)

// limiterChecks are the option matrix's checks for the limiter column,
// where a hold's check does not fit; the other rows use the hold's.
var limiterChecks = map[string]func(t *testing.T, e *matrixEnv, opt lock.Option){
	"WithWaitTimeout": checkWaitTimeout,
	"WithNotify":      checkNotify,
	"WithPrefix":      checkPrefix,
	"WithObserver":    checkLimiterObserver,
}

// checkLimiterObserver: the Observer sees the units taken.
func checkLimiterObserver(t *testing.T, e *matrixEnv, _ lock.Option) {
	var units atomic.Int64
	e.smoke(t, lock.WithObserver(lock.ObserverFunc(func(ev lock.Event) {
		if ev.Kind == lock.EventLimit && ev.Err == nil {
			units.Add(ev.Units)
		}
	})))
	if n := units.Load(); n != 1 {
		t.Fatalf("the Observer saw %d units taken, want 1", n)
	}
}
