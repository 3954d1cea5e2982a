package lease

import (
	"context"
	"slices"

	"github.com/redis/go-redis/v9"
)

// SlotSource is the Source of the channels of one hash slot of a Redis
// Cluster (7.0 or later) whose messages are sharded (SPUBLISH): its
// subscription listens with SSUBSCRIBE on the master that owns Slot. One
// per slot, because go-redis routes a sharded subscription, and its
// resubscription after a reconnect, by the slot of one of its channels, and
// one SSUBSCRIBE must not mix slots.
//
// When the slot moves (a migration, a failover) the old master ends the
// subscription of the slot's channels (an unsolicited SUNSUBSCRIBE) or a
// new one is refused with MOVED: the Notifier then reloads the cluster's
// slot map, closes the subscription, wakes its waiters and subscribes their
// channels afresh, on the slot's new master.
type SlotSource struct {
	Client *redis.ClusterClient // the cluster
	Slot   int                  // the slot whose channels it subscribes
}

// Subscribe opens a sharded subscription.
func (s SlotSource) Subscribe(ctx context.Context, channels ...string) *redis.PubSub {
	return s.Client.SSubscribe(ctx, channels...)
}

// slotMoved handles the end of sharded subscription s by its server (see
// SlotSource): s is closed and dropped, every waiter of its channels woken
// (a release may have gone unseen), and the channels that still have
// waiters subscribed again, through a fresh view of the slot map.
//
// It holds s.order until s is dropped, so a subscribe on s still under way
// (whose SSUBSCRIBE the server refused with MOVED at once) has listed its
// channel on s first, and that channel is subscribed again here; a
// subscribe that reaches s after it was dropped opens a fresh one.
func (n *Notifier) slotMoved(s *subscription) {
	if s.slot.Client != nil {
		s.slot.Client.ReloadState(n.e.ctx)
	}
	s.order.Lock()
	_ = s.ps.Close()
	n.mu.Lock()
	var again []*channelState
	for _, cs := range n.chans {
		if !slices.Contains(cs.subs, s) {
			continue
		}
		waiters := cs.owner().waiters
		for _, w := range waiters {
			signal(w)
		}
		if len(waiters) > 0 {
			again = append(again, cs)
		}
	}
	n.mu.Unlock()
	n.drop(s)
	s.order.Unlock()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.e.Closed() {
		return
	}
	for _, cs := range again {
		if len(cs.owner().waiters) > 0 {
			n.subscribeOnce(cs) // or makes a subscribe that waits try at once
		}
	}
}
