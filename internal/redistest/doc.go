// Package redistest starts real redis-server processes for tests and
// benchmarks: single servers, Redis Cluster, Sentinel and TLS servers, each
// on free loopback ports in its own temporary directory, never touching a
// Redis that is already running on the machine.
//
// Tests use the wrappers that take a [testing.TB]. They skip the test when
// redis-server is not on PATH, or fail it when LOCK_REQUIRE_REDIS=1, and stop
// every process with t.Cleanup:
//
//	s := redistest.Start(t, redistest.Config{})
//	rdb := s.Client(t) // closed by t.Cleanup
//	s.Kill()           // SIGKILL by pid; s.Restart() brings it back, empty
//
//	c := redistest.StartCluster(t, 3, 1) // 3 masters, 1 replica each
//	m, _ := c.MasterForKey(ctx, "k")
//	newMaster, err := c.KillMasterAndWaitFailover(ctx, m)
//
//	sn := redistest.StartSentinel(t, 1, 3) // master, 1 replica, 3 sentinels
//	addr, err := sn.KillMasterAndWaitFailover(ctx)
//
//	s, tlsCfg := redistest.StartTLS(t)
//
// Programs that have no testing.TB, such as a benchmark harness, use the core
// functions [StartServer], [StartClusterNodes], [StartSentinelNodes] and
// [StartTLSServer] and call Stop themselves.
//
// Every process is started with its own process group and with
// Pdeathsig=SIGKILL (on Linux), so it dies with the test binary. Servers run
// with an empty --save and --appendonly no: a restarted server is empty. Each
// server logs to redis.log in its directory; on a failed start the error
// carries the tail of that log, and [Start] logs it when the test fails.
//
// The Debian redis-server 7.0 package is built with TLS; on a build without
// it, [StartTLS] skips the test and [StartTLSServer] returns [ErrNoTLS].
package redistest
