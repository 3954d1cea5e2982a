package lock_test

import (
	"os/exec"
	"sync"
	"testing"

	"github.com/agentlock/lock/internal/redistest"
)

// shared is the one 3-master Redis Cluster that the package's tests share
// when they only read and write their own keys (derived from t.Name()):
// they change no node, no slot and no server-wide setting. A test that
// kills, pauses or migrates starts a cluster of its own.
var shared struct {
	once sync.Once
	cl   *redistest.Cluster
	err  error
}

// sharedCluster returns the shared cluster, started on first use. Where
// redis-server or redis-cli is missing it skips or fails t as
// redistest.StartCluster does.
func sharedCluster(t *testing.T) *redistest.Cluster {
	t.Helper()
	if redistest.Available() != nil || !cliOnPath() {
		return redistest.StartCluster(t, 3, 0)
	}
	shared.once.Do(func() { shared.cl, shared.err = redistest.StartClusterNodes(3, 0) })
	if shared.err != nil {
		t.Fatalf("StartClusterNodes() error = %v", shared.err)
	}
	return shared.cl
}

// stopSharedCluster stops the shared cluster if a test started it.
func stopSharedCluster() {
	if shared.cl != nil {
		shared.cl.Stop()
	}
}

// cliOnPath reports whether redis-cli, which creates clusters, is on PATH.
func cliOnPath() bool {
	_, err := exec.LookPath("redis-cli")
	return err == nil
}
