package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// clusterSlots is the number of hash slots in a Redis Cluster.
	clusterSlots = 16384
	// clusterTimeout bounds creating a cluster and waiting until it agrees.
	clusterTimeout = 30 * time.Second
)

// Cluster is a Redis Cluster whose nodes this package started. Its methods
// are safe for concurrent use.
type Cluster struct {
	nodes    []*Server
	replicas int
}

// StartClusterNodes starts masters*(1+replicas) cluster nodes, creates a
// cluster of them with redis-cli --cluster create, and waits up to 30s
// until every node reports cluster_state:ok, knows every node, and serves
// the same map of all 16384 slots with replicas per master, and every
// replica's link to its master is up. Each node runs in its own directory with
//
//	--cluster-enabled yes --cluster-config-file nodes.conf
//	--cluster-node-timeout 1000 --cluster-port B
//
// followed by args, so "--cluster-node-timeout", "5000" in args slows
// failure detection down. masters must be at least 3, as redis-cli demands.
// It fails when redis-server or redis-cli is not on PATH. The caller must
// call [Cluster.Stop].
func StartClusterNodes(masters, replicas int, args ...string) (*Cluster, error) {
	if masters < 3 || replicas < 0 {
		return nil, fmt.Errorf("redistest: cluster of %d masters with %d replicas each: need at least 3 masters", masters, replicas)
	}
	if err := Available(); err != nil {
		return nil, err
	}
	if err := cliAvailable(); err != nil {
		return nil, err
	}
	nodeArgs := append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "1000"}, args...)
	nodes, err := startMany(masters*(1+replicas), func(int) Config {
		return Config{Args: nodeArgs, clusterBus: true}
	})
	if err != nil {
		return nil, err
	}
	c := &Cluster{nodes: nodes, replicas: replicas}
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	if err := c.create(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.waitReady(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// create runs redis-cli --cluster create over every node.
func (c *Cluster) create(ctx context.Context) error {
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(c.replicas), "--cluster-yes")
	cmd := exec.CommandContext(ctx, cliBin, args...)
	cmd.SysProcAttr = sysProcAttr()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("redistest: redis-cli --cluster create: %w\n%s", err, out)
	}
	return nil
}

// Addrs returns every node's address, masters and replicas alike, in start order.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Nodes returns every node, in the order of [Cluster.Addrs]. Which are
// masters can change; ask [Cluster.MasterForKey] or [Cluster.ReplicaOf].
func (c *Cluster) Nodes() []*Server {
	return append([]*Server(nil), c.nodes...)
}

// ClusterOptions returns new client options that seed with every node and
// reload the slot map every second (ClusterStateReloadInterval). go-redis
// reloads it on MOVED and ASK replies and on that interval, 60s by default,
// but not on connection errors, so with the default a client keeps dialing a
// killed master for up to a minute after its replica has taken over.
func (c *Cluster) ClusterOptions() *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: c.Addrs(), ClusterStateReloadInterval: time.Second}
}

// NewClient returns a new cluster client made with [Cluster.ClusterOptions].
// The caller closes it.
func (c *Cluster) NewClient() *redis.ClusterClient {
	return redis.NewClusterClient(c.ClusterOptions())
}

// Stop stops every node at once, as [Server.Stop] does. It is idempotent.
func (c *Cluster) Stop() { stopAll(c.nodes) }

// byAddr returns the node at addr, or nil.
func (c *Cluster) byAddr(addr string) *Server {
	for _, n := range c.nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// running returns the nodes whose process is alive.
func (c *Cluster) running() []*Server {
	var alive []*Server
	for _, n := range c.nodes {
		if n.Running() {
			alive = append(alive, n)
		}
	}
	return alive
}
