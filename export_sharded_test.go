package lock

import (
	"context"
	"time"

	"github.com/agentlock/lock/internal/lease"
)

// ShardedPubSub reports, for tests, whether c's wake-ups use sharded
// pub/sub, deciding it first if need be.
func ShardedPubSub(c *Client) bool { return c.pub.sharded(context.Background()) }

// ForceClassicPubSub makes c's wake-ups classic pub/sub whatever its
// servers, before its first call: the "before" of the sharded measurement.
func ForceClassicPubSub(c *Client) { c.pub.state.Store(pubClassic) }

// AtLeast7 exposes the version check of INFO server's text.
var AtLeast7 = atLeast7

// ShardedSubscriptions returns how many sharded pub/sub connections (one
// per cluster slot in use) c holds open.
func ShardedSubscriptions(c *Client) int {
	_, n := c.eng.Notifier.Subscriptions()
	return n
}

// ClassicSubscriptions returns how many classic pub/sub connections c
// holds open.
func ClassicSubscriptions(c *Client) int {
	n, _ := c.eng.Notifier.Subscriptions()
	return n
}

// SetNotifyIdle sets how long an unused wake-up channel stays subscribed;
// the default comes back when the test ends.
func SetNotifyIdle(t interface{ Cleanup(func()) }, d time.Duration) {
	t.Cleanup(lease.SetNotifyIdle(d))
}
