package redlock

import "github.com/agentlock/lock/internal/luascripts"

// FenceRaises reports how many acquisitions of c needed the extra round
// that raises lagging fence counters.
func FenceRaises(c *Client) int64 { return c.fenceRaises.Load() }

// IdleWaiters reports, for tests, how many waiters of c wait on key (under
// the default prefix) between attempts, with no wake-up they have not
// acted on.
func IdleWaiters(c *Client, key string) int {
	k := luascripts.NewKeys(DefaultPrefix, key)
	return c.eng.Notifier.IdleWaiters(k.Notify())
}

// Confirmations reports, for tests, how many confirmations of the
// subscription to key's channel (under the default prefix) c has read,
// from all nodes together.
func Confirmations(c *Client, key string) int {
	k := luascripts.NewKeys(DefaultPrefix, key)
	return c.eng.Notifier.Confirmations(k.Notify())
}
