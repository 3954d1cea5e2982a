package lock

// LocalGate reports, for tests, how many keys c's local gate keeps state
// for (degraded holds, Redis handles, waiters), and how many waiters it
// counts on key under the default prefix.
func LocalGate(c *Client, key string) (keys, waiters int) {
	g := &c.local
	g.mu.Lock()
	defer g.mu.Unlock()
	if e := g.keys[DefaultPrefix+"{"+key+"}"]; e != nil {
		waiters = e.waiters
	}
	return len(g.keys), waiters
}
