package lock

// backendKind picks one of the few shared backends.
type backendKind struct {
	mode      ReleaseMode
	reentrant bool
	fencing   bool
	coalesce  bool
	info      bool // holder info is written (WithHolderInfo)
}

// backend returns c's backend of kind k, making it on first use; the
// Client keeps one per kind, shared by its locks.
func (c *Client) backend(k backendKind) backend {
	c.beMu.Lock()
	defer c.beMu.Unlock()
	if b, ok := c.backends[k]; ok {
		return b
	}
	var b backend
	if k.mode == ReleaseWatch {
		b = &watchBackend{rdb: c.rdb, fencing: k.fencing, pub: &c.pub}
	} else {
		sb := &scriptBackend{rdb: c.rdb, reentrant: k.reentrant, fencing: k.fencing, info: k.info, pub: &c.pub}
		if k.coalesce {
			if c.co == nil {
				c.co = newLanes(c.rdb, c.cfg.logger)
			}
			sb.co = c.co
		}
		b = sb
	}
	c.backends[k] = b
	return b
}
