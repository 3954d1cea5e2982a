package lock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestLock_Release_racingExtendKeepsLostOpen: an Extend that is out while
// Release deletes the key finds it gone and returns ErrNotHeld, yet the
// normal Release leaves Lost() open.
func TestLock_Release_racingExtendKeepsLostOpen(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		b := &hookBackend{fakeBackend: f}
		c := hookClient(b)
		defer c.Close()
		l := c.NewLock("k", WithTTL(3*time.Second))
		mustAcquire(t, l)
		lost := l.Lost()
		entered, gate, extended := make(chan struct{}), make(chan struct{}), make(chan struct{})
		var once sync.Once
		b.beforeExtend = func() { close(entered); <-gate }
		b.afterRelease = func() { once.Do(func() { close(gate); <-extended }) }
		go func() {
			err := l.Extend(context.Background(), time.Minute)
			if !errors.Is(err, ErrNotHeld) {
				t.Errorf("Extend() racing Release = %v, want ErrNotHeld", err)
			}
			close(extended)
		}()
		<-entered
		if err := l.Release(context.Background()); err != nil {
			t.Fatalf("Release() error = %v", err)
		}
		if isClosedCh(lost) {
			t.Fatalf("Lost() closed by a normal Release (LostErr %v)", l.LostErr())
		}
	})
}
