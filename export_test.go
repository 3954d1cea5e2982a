package lock

// CoalescerLoad reports, for tests, how many sends the Client's coalescers
// have out and how many calls wait in their queues, summed over the lanes
// (one per node on a cluster), and the lengths of the queues that are not
// empty.
func CoalescerLoad(c *Client) (out, queued int, queues []int) {
	c.beMu.Lock()
	ls := c.co
	c.beMu.Unlock()
	if ls == nil {
		return 0, 0, nil
	}
	ls.each(func(co *coalescer) {
		co.mu.Lock()
		defer co.mu.Unlock()
		out += co.out
		queued += len(co.queue)
		if len(co.queue) > 0 {
			queues = append(queues, len(co.queue))
		}
	})
	return out, queued, queues
}
