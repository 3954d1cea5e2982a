package lock

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// acquireAcked is an acquire followed by WAIT on the same connection (WAIT
// only counts the writes of the connection it is sent on), for
// [WithReplicaAck]. Too few acknowledgements, or a failed WAIT, undo the
// acquisition; the error then says so (see spent).
func (l *Lock) acquireAcked(ctx context.Context, token string) (acquireResult, error) {
	node, err := l.cfg.c.masterFor(ctx, l.hd.Keys.Lock())
	if err != nil {
		return acquireResult{}, err
	}
	conn := node.Conn()
	defer conn.Close()
	be := &scriptBackend{rdb: conn, reentrant: l.cfg.ownerSet, fencing: l.cfg.fencing, info: l.cfg.info != nil, pub: &l.cfg.c.pub}
	r, err := be.acquireInfo(ctx, &l.hd.Keys, token, l.cfg.ttl, l.cfg.info)
	if err != nil || !r.ok {
		return r, err
	}
	acks, err := conn.Wait(ctx, l.cfg.acks, l.cfg.ackTimeout).Result()
	if err == nil && acks >= int64(l.cfg.acks) {
		return r, nil
	}
	if err != nil {
		err = fmt.Errorf("replica ack: %w", err)
	} else {
		err = fmt.Errorf("%w: %d of %d replicas acknowledged within %v",
			ErrNotAcquired, acks, l.cfg.acks, l.cfg.ackTimeout)
	}
	if l.cfg.ownerSet {
		return acquireResult{}, err
	}
	// Undone like a late reply (see install): on a context of its own, as
	// ctx may be what ended the WAIT, and the token is spent.
	// The token names this hold alone, re-entrant or not: the release
	// drops it and nothing of the owner's others.
	uctx, cancel := context.WithTimeout(context.Background(), l.cfg.pol.UndoTimeout)
	defer cancel()
	_, _ = be.release(uctx, &l.hd.Keys, token)
	return acquireResult{}, undoneError{err}
}

// canWait reports whether masterFor can find a node to send WAIT to.
func canWait(rdb redis.UniversalClient) bool {
	switch rdb.(type) {
	case *redis.Client, *redis.ClusterClient:
		return true
	}
	return false
}

// masterFor returns a client for the master that holds key.
func (c *Client) masterFor(ctx context.Context, key string) (*redis.Client, error) {
	switch v := c.rdb.(type) {
	case *redis.Client:
		return v, nil
	case *redis.ClusterClient:
		return v.MasterForKey(ctx, key)
	}
	return nil, invalidf("replica acks need a *redis.Client or *redis.ClusterClient, not %T", c.rdb)
}
