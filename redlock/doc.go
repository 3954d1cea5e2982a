// Package redlock provides quorum locks over N independent Redis nodes, with
// the verbs and meanings of the core package [lock]: [New] returns a
// [Client] whose [Client.NewLock] and [Client.WithLock] give locks that
// [Lock.Acquire], [Lock.TryAcquire], [Lock.Release], [Lock.Extend], report
// [Lock.Validity] and [Lock.Lost], and carry [Lock.Key], [Lock.Token] and
// [Lock.Fence]; errors match the core's sentinels ([lock.ErrNotAcquired],
// [lock.ErrNotHeld], [lock.ErrLockLost], [lock.ErrClosed],
// [lock.ErrInvalid]) under errors.Is. So a small interface of those verbs
// covers both kinds of lock.
//
// An acquisition sends SET NX PX with one random token to every node in
// parallel, each call bounded by a node timeout far below the TTL
// ([WithNodeTimeout], default 100ms, at most TTL/10). It holds when a quorum
// (N/2+1 by default, [WithQuorum]) granted it and its validity, TTL − elapsed
// (monotonic clock) − drift (TTL·0.01 + 2ms, [WithDriftFactor]), is still
// positive; otherwise it is undone on every node that did not refuse it,
// including nodes that failed or did not answer (each node's undo is sent
// once that node's acquire call has returned, so it cannot overtake it),
// and Acquire waits (jittered backoff, woken by a release published on any
// node) and tries again with a fresh token. Each
// node uses the core's storage layout (P{K}, P{K}:fence, P{K}:notify,
// prefix "lock:" by default); do not use the same key with the core lock on
// any of the nodes, or their fence counters move independently.
//
// Use an odd number of nodes, at least 3; with 5, the lock survives two
// failed nodes. The nodes must be independent masters, not replicas.
//
// Holds are renewed at TTL/3 by the Client's renewal loop, which sends the
// renewals due together, one pipeline per node, and carry a fence that
// strictly increases across successive holders while a majority of the
// nodes keeps its data; docs/safety.md (section Redlock) in the repository
// states what the lock and the fence guarantee and where they break (clock
// jumps, nodes restarted empty: keep a crashed node down for at least the
// longest TTL).
//
// There is no Once here (the core's [lock.Client.Once]). Storing a result
// with the release on a quorum would need every node's store to check its
// own hold, and readers to ask a majority and reconcile their copies: a
// node that missed the store or restarted empty answers "no result", which
// would let fn run again. Use the core's Once on one Redis or a Cluster,
// or a redlock WithLock whose result goes to a store that checks the fence.
//
// # Read-write locks
//
// There is no quorum read-write lock, not yet. Quorums would carry it (a
// reader needs a majority of nodes with no writer, a writer a majority with
// no reader; two majorities share a node, which refuses one of them), but
// three parts of the core's read-write lock do not carry over as they are:
// the waiting writer's mark, which on N nodes lands on some and not others,
// so that readers and a writer can each take a part of the nodes, all fail,
// undo and retry together (it needs a rule for who backs off, which we have
// not written and tested); the reader's fence, which must be the greatest
// current fence of a quorum, not of one node; and the cost, one renewal per
// reader per node. Until those are designed and tested under the fault
// suite, use the core's [lock.Client.NewRWLock] on one Redis (or a Cluster),
// or a quorum mutex where readers may wait for each other.
//
// # No semaphore
//
// The core's semaphore ([lock.Client.NewSemaphore]) has no quorum form
// here, because a majority quorum does not bound a semaphore. A lock
// (n = 1) is safe over a quorum since any two majorities share a node, and
// that node admits one token at a time. With n > 1 a node admits n tokens,
// and n+1 holders fit on majorities that pairwise overlap without any node
// holding more than n: over 3 nodes with n = 2, holders on {a, b}, {b, c}
// and {a, c} put two permits on each node and three holders in the
// section. To keep n+1 holders out, each holder would need more than
// N·n/(n+1) of the N nodes, which for n = 8 over 5 nodes is all 5: no
// node could fail, which is what a quorum is for. A semaphore that must
// survive a node's loss should run on one Redis with a replica and
// Sentinel or Cluster failover, with the caveat docs/safety.md states for
// failover (a promoted replica may have missed the latest permits).
//
// # No fair locks or multi-locks
//
// Fair locks ([lock.WithFair]) and multi-locks ([lock.Client.NewMultiLock])
// exist in the core only. A fair queue is state that every grant must read
// and update atomically with the lock: over N nodes the queues drift apart
// (a waiter queued on a quorum is not queued on the others, a failed round
// leaves entries behind), so the head one node hands the key to is not the
// head another does, and no quorum need agree on one — fairness would need
// a consensus on the order that Redlock does not provide. A multi-lock over
// quorum locks is possible in principle (each member a quorum hold, taken in
// the canonical order), but its rounds multiply (groups × nodes) and a
// partial failure must be undone on every node; it is not offered until
// there is a measured need. Use the core's kinds on one Redis (or a
// Cluster) when you need them.
package redlock
