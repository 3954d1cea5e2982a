package lockutil

import (
	"sync"
	"time"
)

// CloseWait bounds how long a Client's Close waits for its pub/sub
// subscriptions to end (see CloseBounded).
const CloseWait = 100 * time.Millisecond

// CloseBounded runs each of closers on a goroutine of its own, counted in
// wg, then waits at most d for wg: those goroutines and every other one wg
// counts. It reports whether they all ended in time; those that did not go
// on, and end by themselves.
//
// go-redis holds a PubSub's mutex while it dials and greets its server, and
// PubSub.Close needs that mutex: against a stopped server it waits until
// go-redis's read timeout passes (never, with ReadTimeout -1). Closing
// subscriptions this way keeps Close prompt; the caller must have stopped
// adding to wg first.
func CloseBounded(wg *sync.WaitGroup, d time.Duration, closers ...func() error) bool {
	for _, c := range closers {
		wg.Go(func() { _ = c() })
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
