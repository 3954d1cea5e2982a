package redlock

// FenceRaises reports how many acquisitions of c needed the extra round
// that raises lagging fence counters.
func FenceRaises(c *Client) int64 { return c.fenceRaises.Load() }
