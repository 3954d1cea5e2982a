package redistest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// masterName is the name the sentinels monitor the master under.
	masterName = "mymaster"
	// sentinelTimeout bounds the wait until a new setup has converged.
	sentinelTimeout = 20 * time.Second
)

// Sentinel is a master, its replicas and the sentinels that monitor it,
// all started by this package. Its methods are safe for concurrent use.
type Sentinel struct {
	master    *Server
	replicas  []*Server
	sentinels []*Server
}

// StartSentinelNodes starts a master, replicas replicas of it
// (--replicaof 127.0.0.1 PORT) and sentinels sentinels that monitor it as
// "mymaster" with quorum sentinels/2+1, down-after-milliseconds 1000,
// failover-timeout 5000 and parallel-syncs 1. Each sentinel runs as
// redis-server sentinel.conf --sentinel from a config file in its own
// directory, which the sentinel rewrites. It waits up to 20s until every
// replica's link is up and every sentinel names the master and sees all
// replicas and the other sentinels. The caller must call [Sentinel.Stop].
func StartSentinelNodes(replicas, sentinels int) (*Sentinel, error) {
	if replicas < 0 || sentinels < 1 {
		return nil, fmt.Errorf("redistest: sentinel setup with %d replicas and %d sentinels: need a sentinel", replicas, sentinels)
	}
	master, err := StartServer(Config{})
	if err != nil {
		return nil, err
	}
	sn := &Sentinel{master: master}
	mport := strconv.Itoa(master.Port())
	sn.replicas, err = startMany(replicas, func(int) Config {
		return Config{Args: []string{"--replicaof", "127.0.0.1", mport}}
	})
	if err != nil {
		sn.Stop()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), sentinelTimeout)
	defer cancel()
	// Sentinels learn of replicas from the master's INFO: start them once
	// the replicas are attached, so the first INFO already lists them.
	if err := poll(ctx, "wait for replicas", sn.linksUp); err != nil {
		sn.Stop()
		return nil, err
	}
	conf := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]s %[3]d\n"+
		"sentinel down-after-milliseconds %[1]s 1000\n"+
		"sentinel failover-timeout %[1]s 5000\n"+
		"sentinel parallel-syncs %[1]s 1\n", masterName, mport, sentinels/2+1)
	sn.sentinels, err = startMany(sentinels, func(int) Config { return Config{sentinel: conf} })
	if err != nil {
		sn.Stop()
		return nil, err
	}
	if err := poll(ctx, "wait for sentinels", sn.converged); err != nil {
		sn.Stop()
		return nil, err
	}
	return sn, nil
}

// linksUp returns nil when every replica's link to the master is up.
func (sn *Sentinel) linksUp(ctx context.Context) error {
	for _, r := range sn.replicas {
		if err := r.linkUp(ctx); err != nil {
			return err
		}
	}
	return nil
}

// converged returns nil when every sentinel names the master and sees
// every replica and every other sentinel.
func (sn *Sentinel) converged(ctx context.Context) error {
	for _, s := range sn.sentinels {
		rdb := redis.NewSentinelClient(s.adminOptions())
		err := sn.sees(ctx, rdb, s.Addr())
		rdb.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func (sn *Sentinel) sees(ctx context.Context, rdb *redis.SentinelClient, addr string) error {
	m, err := rdb.GetMasterAddrByName(ctx, masterName).Result()
	if err != nil {
		return fmt.Errorf("redistest: sentinel %s: get-master-addr-by-name: %w", addr, err)
	}
	if len(m) != 2 || hostPortOf(m) != sn.master.Addr() {
		return fmt.Errorf("redistest: sentinel %s names master %v, want %s", addr, m, sn.master.Addr())
	}
	reps, err := rdb.Replicas(ctx, masterName).Result()
	if err != nil {
		return fmt.Errorf("redistest: sentinel %s: replicas: %w", addr, err)
	}
	up := 0
	for _, r := range reps {
		if r["flags"] == "slave" {
			up++
		}
	}
	if up != len(sn.replicas) {
		return fmt.Errorf("redistest: sentinel %s sees %d healthy replicas, want %d", addr, up, len(sn.replicas))
	}
	others, err := rdb.Sentinels(ctx, masterName).Result()
	if err != nil {
		return fmt.Errorf("redistest: sentinel %s: sentinels: %w", addr, err)
	}
	if len(others) != len(sn.sentinels)-1 {
		return fmt.Errorf("redistest: sentinel %s sees %d other sentinels, want %d", addr, len(others), len(sn.sentinels)-1)
	}
	return nil
}

// hostPortOf joins a get-master-addr-by-name reply, [ip port].
func hostPortOf(m []string) string { return strings.Join(m, ":") }

// MasterName returns the name the sentinels monitor the master under, "mymaster".
func (sn *Sentinel) MasterName() string { return masterName }

// SentinelAddrs returns the sentinels' addresses.
func (sn *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(sn.sentinels))
	for i, s := range sn.sentinels {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Master returns the server started as master. After a failover it may be
// dead or a replica; [Sentinel.CurrentMaster] names the master now.
func (sn *Sentinel) Master() *Server { return sn.master }

// Replicas returns the servers started as replicas.
func (sn *Sentinel) Replicas() []*Server { return append([]*Server(nil), sn.replicas...) }

// Sentinels returns the sentinel processes.
func (sn *Sentinel) Sentinels() []*Server { return append([]*Server(nil), sn.sentinels...) }

// FailoverOptions returns new options for a client that finds the master
// through the sentinels.
func (sn *Sentinel) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{MasterName: masterName, SentinelAddrs: sn.SentinelAddrs()}
}

// NewFailoverClient returns a new client that follows the master through
// failovers (redis.NewFailoverClient). The caller closes it.
func (sn *Sentinel) NewFailoverClient() *redis.Client {
	return redis.NewFailoverClient(sn.FailoverOptions())
}

// Stop stops the sentinels first, so they start no failover, then the
// master and replicas. It is idempotent.
func (sn *Sentinel) Stop() {
	stopAll(sn.sentinels)
	stopAll(append([]*Server{sn.master}, sn.replicas...))
}
