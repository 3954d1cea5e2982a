package lock

// CoalescerLoad reports, for tests, how many sends the Client's coalescer
// has out and how many calls wait in its queue (0, 0 before first use).
func CoalescerLoad(c *Client) (out, queued int) {
	c.beMu.Lock()
	co := c.co
	c.beMu.Unlock()
	if co == nil {
		return 0, 0
	}
	co.mu.Lock()
	defer co.mu.Unlock()
	return co.out, len(co.queue)
}
