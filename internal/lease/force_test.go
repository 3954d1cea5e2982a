package lease

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestNotifier_listen_subscribeRetried: a hold listening on the Client's
// force channel, whose first SUBSCRIBE found no source, gets the channel
// subscribed by the background retry with no waiter on it, and a
// force-release message then reaches the hold.
func TestNotifier_listen_subscribeRetried(t *testing.T) {
	e, rdb, asked := engineFirstSubscribeFails(t)
	n := &e.Notifier
	const channel = "lock:force:c1"
	pol := &Policy{Engine: e, Pkg: "lock", Inbox: channel, TTL: time.Minute,
		Margin: func(time.Duration) time.Duration { return time.Millisecond },
		Lost:   func(key string, r Reason, err error) error { return errors.New(r.Name()) }}
	hd := &Handle{pol: pol}
	hd.Keys.User = "k"
	h := newHold(hd, "t1", 1, time.Now())

	e.add(h)
	n.listen(channel)
	defer h.unlisten()
	for deadline := time.Now().Add(10 * time.Second); !n.Listening(channel); {
		if time.Now().After(deadline) {
			t.Fatalf("force channel not subscribed 10s after the hold listened: sources asked %d times; want the subscribe tried again while a hold listens",
				asked.Load())
		}
		time.Sleep(5 * time.Millisecond) // polls a state; opens no window
	}
	if err := rdb.Publish(context.Background(), channel, MsgForce+"t1").Err(); err != nil {
		t.Fatalf("PUBLISH: %v", err)
	}
	select {
	case <-h.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("hold not lost 10s after a force-release message on its confirmed channel")
	}
	if got := h.LostErr(); got == nil {
		t.Fatal("LostErr() = nil after the force-release message")
	}
}
