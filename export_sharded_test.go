package lock

import "context"

// ShardedPubSub reports, for tests, whether c's wake-ups use sharded
// pub/sub, deciding it first if need be.
func ShardedPubSub(c *Client) bool { return c.pub.sharded(context.Background()) }

// ForceClassicPubSub makes c's wake-ups classic pub/sub whatever its
// servers, before its first call: the "before" of the sharded measurement.
func ForceClassicPubSub(c *Client) { c.pub.state.Store(pubClassic) }

// AtLeast7 exposes the version check of INFO server's text.
var AtLeast7 = atLeast7
