package redistest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// opTimeout bounds the queries of methods that take no context.
const opTimeout = 5 * time.Second

// MasterForKey returns the node that serves key's hash slot, asking the
// running nodes in turn for CLUSTER KEYSLOT and CLUSTER SLOTS. It fails
// when no running node answers or the slot is unassigned.
func (c *Cluster) MasterForKey(ctx context.Context, key string) (*Server, error) {
	var errs []error
	for _, n := range c.running() {
		m, err := c.masterForKey(ctx, n, key)
		if err == nil {
			return m, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("redistest: master for key %q: %w", key, errors.Join(errs...))
}

func (c *Cluster) masterForKey(ctx context.Context, n *Server, key string) (*Server, error) {
	rdb := n.adminClient()
	slot, err := rdb.ClusterKeySlot(ctx, key).Result()
	rdb.Close()
	if err != nil {
		return nil, fmt.Errorf("redistest: cluster keyslot on %s: %w", n.Addr(), err)
	}
	return c.masterForSlot(ctx, n, int(slot))
}

// ReplicaOf returns the replicas of master that the cluster does not flag
// as failed, as CLUSTER NODES reports them: master's own view if it is
// running, else another running node's. It fails when no node answers or
// none knows master; an empty result means master has no live replicas.
func (c *Cluster) ReplicaOf(master *Server) ([]*Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	// Prefer the master's own view: it is the first to learn of its replicas.
	ask := c.running()
	if i := slices.Index(ask, master); i > 0 {
		ask[0], ask[i] = ask[i], ask[0]
	}
	var errs []error
	for _, n := range ask {
		reps, err := c.replicaOf(ctx, n, master)
		if err == nil {
			return reps, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("redistest: replicas of %s: %w", master.Addr(), errors.Join(errs...))
}

func (c *Cluster) replicaOf(ctx context.Context, n, master *Server) ([]*Server, error) {
	rdb := n.adminClient()
	entries, err := readNodes(ctx, rdb)
	rdb.Close()
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(entries, func(e nodeEntry) bool { return e.addr == master.Addr() && !e.has("fail") })
	if i < 0 {
		return nil, fmt.Errorf("redistest: %s does not know %s as a live node", n.Addr(), master.Addr())
	}
	var reps []*Server
	for _, e := range entries {
		if e.masterID == entries[i].id && !e.has("fail") {
			if s := c.byAddr(e.addr); s != nil {
				reps = append(reps, s)
			}
		}
	}
	return reps, nil
}

// KillMasterAndWaitFailover SIGKILLs master and waits until one of its
// replicas has taken over its slots: every running node reports
// cluster_state:ok and serves the same full slot map, in which master owns
// nothing. It returns the new master of master's slots. It fails at once if
// master owns no slots or has no live replica, and when ctx ends; give ctx
// a deadline. With the default 1s node timeout a failover takes a few
// seconds. master stays killed: [Server.Restart] brings it back as a replica.
func (c *Cluster) KillMasterAndWaitFailover(ctx context.Context, master *Server) (*Server, error) {
	reps, err := c.ReplicaOf(master)
	if err != nil {
		return nil, err
	}
	if len(reps) == 0 {
		return nil, fmt.Errorf("redistest: failover of %s: it has no live replica", master.Addr())
	}
	rdb := master.adminClient()
	ranges, err := readSlots(ctx, rdb)
	rdb.Close()
	if err != nil {
		return nil, err
	}
	owned := -1
	for _, r := range ranges {
		if r.master == master.Addr() {
			owned = r.start
			break
		}
	}
	if owned < 0 {
		return nil, fmt.Errorf("redistest: failover of %s: it owns no slots", master.Addr())
	}

	master.Kill()
	ck := clusterCheck{gone: master.Addr(), replicas: -1}
	var promoted *Server
	err = poll(ctx, "wait for failover of "+master.Addr(), func(ctx context.Context) error {
		ck.nodes = c.running()
		if len(ck.nodes) == 0 {
			return errors.New("redistest: no node is running")
		}
		if err := ck.run(ctx); err != nil {
			return err
		}
		m, err := c.masterForSlot(ctx, ck.nodes[0], owned)
		if err != nil {
			return err
		}
		if !slices.Contains(reps, m) {
			return fmt.Errorf("redistest: slot %d moved to %s, not a replica of %s", owned, m.Addr(), master.Addr())
		}
		promoted = m
		return nil
	})
	if err != nil {
		return nil, err
	}
	return promoted, nil
}

// masterForSlot returns the node that n says serves slot.
func (c *Cluster) masterForSlot(ctx context.Context, n *Server, slot int) (*Server, error) {
	rdb := n.adminClient()
	defer rdb.Close()
	ranges, err := readSlots(ctx, rdb)
	if err != nil {
		return nil, err
	}
	for _, r := range ranges {
		if r.start <= slot && slot <= r.end {
			if m := c.byAddr(r.master); m != nil {
				return m, nil
			}
		}
	}
	return nil, fmt.Errorf("redistest: %s has no known master for slot %d", n.Addr(), slot)
}
