package lease

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestWatch_deliver: every message wakes a Watch, and it never takes a
// waiter's turn: "released" still wakes the longest waiter, MsgWatch wakes
// no waiter, and several messages before the reader looks are one
// wake-up.
func TestWatch_deliver(t *testing.T) {
	n := &Notifier{chans: map[string]*channelState{}}
	cs := &channelState{name: "c"}
	n.chans["c"] = cs
	w := &Waiter{n: n, cs: cs, ch: make(chan struct{}, 1)}
	cs.waiters = []*Waiter{w}
	watch := &Watch{n: n, cs: cs, ch: make(chan struct{}, 1)}
	cs.watches = []*Watch{watch}

	n.deliver("c", MsgWatch)
	if len(w.ch) != 0 || len(watch.ch) != 1 {
		t.Fatalf("MsgWatch: waiter woken %d, watch %d; want 0, 1", len(w.ch), len(watch.ch))
	}
	n.deliver("c", MsgReleased)
	if len(w.ch) != 1 || len(watch.ch) != 1 {
		t.Fatalf("released: waiter woken %d, watch %d; want 1, 1 (one buffered wake-up)", len(w.ch), len(watch.ch))
	}
	<-watch.ch
	n.deliver("c", MsgForce+"tok")
	if len(watch.ch) != 1 {
		t.Fatal("a force message did not wake the watch")
	}
	watch.Stop()
	if len(cs.watches) != 0 {
		t.Fatal("Stop left the watch on its channel")
	}
}

// TestWatch_subscribes: a Watch alone subscribes its channel; the
// confirmation wakes it, and then a message published on the channel does.
// Nil once the Engine is closed.
func TestWatch_subscribes(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	var e Engine
	e.Init(func(string) []Source { return []Source{rdb} }, nil)
	const channel = "lock:{k}:notify"
	w := e.Notifier.Watch(channel)
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	select {
	case <-w.C():
	case <-timeout.C:
		t.Fatal("the watch was not woken by its subscription's confirmation")
	}
	if !w.Listening() {
		t.Fatal("woken by the confirmation, but not Listening")
	}
	if err := rdb.Publish(context.Background(), channel, MsgWatch).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.C():
	case <-timeout.C:
		t.Fatal("the watch was not woken by a message")
	}
	w.Stop()
	e.Close(nil)
	if e.Notifier.Watch(channel) != nil {
		t.Fatal("Watch() after Close = a watch, want nil")
	}
	var none *Watch
	none.Stop()
	if none.C() != nil || none.Listening() {
		t.Fatal("a nil Watch fires or listens")
	}
}
