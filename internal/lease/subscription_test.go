package lease

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestNotifier_sweep_unsubscribesIdleChannels: a channel left idle (no
// waiter, no hold) is timed from the first sweep that finds it so and
// unsubscribed by a sweep notifyIdle later; a channel that became idle
// again meanwhile starts over, and a busy one stays.
func TestNotifier_sweep_unsubscribesIdleChannels(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	ps := rdb.Subscribe(ctx, "idle", "again", "busy")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatalf("subscribe: %v", err)
	}

	var e Engine
	e.Init(nil, nil)
	defer e.Close(nil)
	n := &e.Notifier
	s := &subscription{ps: ps}
	n.mu.Lock()
	for _, name := range []string{"idle", "again", "busy"} {
		n.chans[name] = &channelState{name: name, subs: []*subscription{s}, subscribed: true}
	}
	n.chans["busy"].holds = 1
	n.mu.Unlock()

	n.sweep(s) // finds "idle" and "again" idle: their time starts
	n.mu.Lock()
	for _, name := range []string{"idle", "again"} {
		cs := n.chans[name]
		if cs == nil || cs.idleSince.IsZero() {
			n.mu.Unlock()
			t.Fatalf("channel %q after the first sweep: %+v, want kept, idle since the sweep", name, cs)
		}
		cs.idleSince = cs.idleSince.Add(-idleAfter()) // as if that time passed
	}
	n.chans["again"].idleSince = time.Time{} // used, and left idle anew
	n.mu.Unlock()

	n.sweep(s)
	n.mu.Lock()
	defer n.mu.Unlock()
	if cs := n.chans["idle"]; cs != nil {
		t.Fatalf("channel idle for notifyIdle still kept: %+v", cs)
	}
	if n.chans["again"] == nil || n.chans["busy"] == nil {
		t.Fatalf("channels kept = %v, want again and busy", n.chans)
	}
}
