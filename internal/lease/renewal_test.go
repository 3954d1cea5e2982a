package lease

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestRenewal_holdsInTurnDoNotWakeTheLoop: one goroutine acquiring and
// releasing in turn (bench S1) leaves the renewal loop no hold to renew
// when it wakes. An idle loop that slept an hour then would be woken by the
// next acquire, find its hold already released, sleep an hour again, and be
// woken by the acquire after: a goroutine wake-up, and its futex call, on
// acquire after acquire. Asleep for half a lead instead, it is due before
// every such hold and no add has to wake it. The loop runs only between
// the cycles here (synctest), as it does when each hold is released before
// the loop gets a CPU.
func TestRenewal_holdsInTurnDoNotWakeTheLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := &Engine{}
		e.Init(nil, nil)
		pol := &Policy{Engine: e, Pkg: "lock", TTL: 3 * time.Second, Watchdog: true,
			Margin: func(time.Duration) time.Duration { return time.Millisecond },
			Lost:   func(key string, r Reason, err error) error { return errors.New(r.String()) }}
		hd := &Handle{pol: pol}
		hd.Keys.User = "k"
		const cycles = 400 // 4s of fake time: the idle loop's timer fires several times
		kicks, idled := 0, false
		for range cycles {
			e.mu.Lock()
			armed := e.armed
			idled = idled || e.idle > 0
			e.mu.Unlock()
			h := newHold(hd, "token", 1, time.Now())
			e.add(h, nil)
			if h.next < armed { // the very test add makes to wake the loop
				kicks++
			}
			e.remove(h)
			synctest.Wait()
			time.Sleep(10 * time.Millisecond)
		}
		if kicks > 1 {
			t.Fatalf("%d of %d acquires woke the renewal loop, want at most 1", kicks, cycles)
		}
		if !idled {
			t.Fatal("the loop never woke idle: the test did not open its window")
		}
		e.Close(nil)
	})
}
