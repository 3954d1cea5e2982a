package redistest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// pollInterval is how often the waits in this package ask the servers again.
const pollInterval = 100 * time.Millisecond

// slotRange is one entry of CLUSTER SLOTS, less its replicas: Redis 7.0
// lists a replica there only once its replication offset is not zero, which
// can take a master's 10s replica ping period.
type slotRange struct {
	start, end int
	master     string
}

// readSlots returns a node's CLUSTER SLOTS sorted by first slot.
func readSlots(ctx context.Context, rdb *redis.Client) ([]slotRange, error) {
	//lint:ignore SA1019 CLUSTER SLOTS answers on every server version the tests run on
	slots, err := rdb.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("redistest: cluster slots on %s: %w", rdb.Options().Addr, err)
	}
	ranges := make([]slotRange, 0, len(slots))
	for _, s := range slots {
		if len(s.Nodes) > 0 {
			ranges = append(ranges, slotRange{start: s.Start, end: s.End, master: s.Nodes[0].Addr})
		}
	}
	slices.SortFunc(ranges, func(a, b slotRange) int { return a.start - b.start })
	return ranges, nil
}

// nodeEntry is one line of CLUSTER NODES.
type nodeEntry struct {
	id, addr, masterID string
	flags              []string
}

// readNodes returns a node's CLUSTER NODES.
func readNodes(ctx context.Context, rdb *redis.Client) ([]nodeEntry, error) {
	text, err := rdb.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("redistest: cluster nodes on %s: %w", rdb.Options().Addr, err)
	}
	var entries []nodeEntry
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		// <id> <ip:port@cport[,hostname]> <flags> <master-id|-> ...
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		entries = append(entries, nodeEntry{id: f[0], addr: addr, masterID: f[3], flags: strings.Split(f[2], ",")})
	}
	return entries, nil
}

// has reports whether the entry carries flag.
func (e nodeEntry) has(flag string) bool { return slices.Contains(e.flags, flag) }

// clusterCheck says what a converged cluster looks like.
type clusterCheck struct {
	nodes    []*Server // the nodes to ask, all running
	gone     string    // a killed master that must own no slots, or ""
	replicas int       // for a new cluster, the replicas each master must have; -1 after a kill
}

// run returns nil when every node reports cluster_state:ok and all serve
// the same map of all slots, in which gone owns none. For a new cluster
// each node must also know every node, none flagged as failing or in a
// handshake, and every master must have its replicas, with links up.
func (ck clusterCheck) run(ctx context.Context) error {
	var want string
	replicas := map[string]bool{}
	for _, n := range ck.nodes {
		rdb := n.adminClient()
		err := ck.runOn(ctx, rdb, n.Addr(), &want, replicas)
		rdb.Close()
		if err != nil {
			return err
		}
	}
	for _, n := range ck.nodes {
		if replicas[n.Addr()] {
			if err := n.linkUp(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// runOn checks one node. want is the slot map every node must agree on,
// set by the first; replicas collects the replicas the node lists.
func (ck clusterCheck) runOn(ctx context.Context, rdb *redis.Client, addr string, want *string, replicas map[string]bool) error {
	info, err := rdb.ClusterInfo(ctx).Result()
	if err != nil {
		return fmt.Errorf("redistest: cluster info on %s: %w", addr, err)
	}
	if v, _ := infoField(info, "cluster_state"); v != "ok" {
		return fmt.Errorf("redistest: %s reports cluster_state:%s", addr, v)
	}
	ranges, err := readSlots(ctx, rdb)
	if err != nil {
		return err
	}
	var b strings.Builder
	covered := 0
	masters := map[string]bool{}
	for _, r := range ranges {
		if r.master == ck.gone {
			return fmt.Errorf("redistest: %s still maps slots %d-%d to %s", addr, r.start, r.end, ck.gone)
		}
		covered += r.end - r.start + 1
		masters[r.master] = true
		fmt.Fprintf(&b, "%d-%d:%s ", r.start, r.end, r.master)
	}
	if covered != clusterSlots {
		return fmt.Errorf("redistest: %s covers %d of %d slots", addr, covered, clusterSlots)
	}
	if *want == "" {
		*want = b.String()
	} else if b.String() != *want {
		return fmt.Errorf("redistest: %s disagrees on the slot map: %s, want %s", addr, b.String(), *want)
	}
	if ck.replicas < 0 {
		return nil
	}
	entries, err := readNodes(ctx, rdb)
	if err != nil {
		return err
	}
	if len(entries) != len(ck.nodes) {
		return fmt.Errorf("redistest: %s knows %d nodes, want %d", addr, len(entries), len(ck.nodes))
	}
	ids := map[string]string{} // master id -> addr
	count := map[string]int{}  // master addr -> replicas
	for _, e := range entries {
		for _, bad := range []string{"fail", "fail?", "handshake", "noaddr"} {
			if e.has(bad) {
				return fmt.Errorf("redistest: %s flags %s as %s", addr, e.addr, bad)
			}
		}
		if masters[e.addr] {
			ids[e.id] = e.addr
		}
	}
	for _, e := range entries {
		if m, ok := ids[e.masterID]; ok {
			count[m]++
			replicas[e.addr] = true
		}
	}
	for m := range masters {
		if count[m] != ck.replicas {
			return fmt.Errorf("redistest: %s lists %d replicas of %s, want %d", addr, count[m], m, ck.replicas)
		}
	}
	return nil
}

// linkUp returns nil when the server, a replica, reports master_link_status:up.
func (s *Server) linkUp(ctx context.Context) error {
	rdb := s.adminClient()
	defer rdb.Close()
	info, err := rdb.Info(ctx, "replication").Result()
	if err != nil {
		return fmt.Errorf("redistest: info replication on %s: %w", s.Addr(), err)
	}
	if v, _ := infoField(info, "master_link_status"); v != "up" {
		return fmt.Errorf("redistest: replica %s has master_link_status:%s", s.Addr(), v)
	}
	return nil
}

// poll calls check every pollInterval until it returns nil or ctx ends,
// then returns ctx's error joined with check's last one.
func poll(ctx context.Context, what string, check func(context.Context) error) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: %s: %w", what, errors.Join(context.Cause(ctx), err))
		case <-tick.C:
		}
	}
}

// waitReady waits until the new cluster has converged.
func (c *Cluster) waitReady(ctx context.Context) error {
	ck := clusterCheck{nodes: c.nodes, replicas: c.replicas}
	return poll(ctx, "wait for cluster", ck.run)
}
