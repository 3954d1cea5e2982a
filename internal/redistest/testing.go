package redistest

import (
	"crypto/tls"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
)

// logLines is how much of a server's log a failed test prints.
const logLines = 30

// Start calls [Require], starts a server as [StartServer] does and stops
// it with t.Cleanup, first logging the tail of its log if t failed. A
// failed start fails t.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	Require(t)
	s, err := StartServer(cfg)
	if err != nil {
		t.Fatalf("StartServer() error = %v", err)
	}
	cleanup(t, s)
	return s
}

// cleanup stops s when t ends, logging its log tail if t failed.
func cleanup(t testing.TB, servers ...*Server) {
	t.Cleanup(func() {
		if t.Failed() {
			for _, s := range servers {
				t.Logf("redis-server %s (pid %d):\n%s", s.Addr(), s.Pid(), s.LogTail(logLines))
			}
		}
		stopAll(servers)
	})
}

// Client returns a new client for the server that t.Cleanup closes.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	rdb := s.NewClient()
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// StartCluster skips or fails t as [Require] does when redis-server or
// redis-cli is missing, starts a cluster as [StartClusterNodes] does and
// stops it with t.Cleanup. A failed start fails t.
func StartCluster(t testing.TB, masters, replicasPerMaster int, args ...string) *Cluster {
	t.Helper()
	Require(t)
	require(t, cliBin, cliAvailable)
	c, err := StartClusterNodes(masters, replicasPerMaster, args...)
	if err != nil {
		t.Fatalf("StartClusterNodes() error = %v", err)
	}
	cleanup(t, c.nodes...)
	return c
}

// Client returns a new cluster client that t.Cleanup closes.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	rdb := c.NewClient()
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// StartSentinel calls [Require], starts a master, replicas and sentinels
// as [StartSentinelNodes] does and stops them with t.Cleanup, sentinels
// first. A failed start fails t.
func StartSentinel(t testing.TB, replicas, sentinels int) *Sentinel {
	t.Helper()
	Require(t)
	sn, err := StartSentinelNodes(replicas, sentinels)
	if err != nil {
		t.Fatalf("StartSentinelNodes() error = %v", err)
	}
	cleanup(t, append([]*Server{sn.master}, sn.replicas...)...)
	cleanup(t, sn.sentinels...) // cleanups run last-in first-out
	return sn
}

// Client returns a new failover client that t.Cleanup closes.
func (sn *Sentinel) Client(t testing.TB) *redis.Client {
	t.Helper()
	rdb := sn.NewFailoverClient()
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// StartTLS calls [Require], starts a TLS-only server as [StartTLSServer]
// does and stops it with t.Cleanup. It skips t when redis-server was built
// without TLS, whatever LOCK_REQUIRE_REDIS says. It returns the server and
// a client config that trusts its CA.
func StartTLS(t testing.TB) (*Server, *tls.Config) {
	t.Helper()
	Require(t)
	s, cfg, err := StartTLSServer(Config{})
	if errors.Is(err, ErrNoTLS) {
		t.Skipf("redis-server lacks TLS support; skipping TLS test: %v", err)
	}
	if err != nil {
		t.Fatalf("StartTLSServer() error = %v", err)
	}
	cleanup(t, s)
	return s, cfg
}
