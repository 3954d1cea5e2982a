package lock

// OnceFollowers returns how many calls of c wait for the Once call under
// way on key (default prefix); -1 when none is under way.
func OnceFollowers(c *Client, key string) int {
	c.once.mu.Lock()
	defer c.once.mu.Unlock()
	f := c.once.flights[DefaultPrefix+"{"+key+"}:"+resultName]
	if f == nil {
		return -1
	}
	return f.followers
}
