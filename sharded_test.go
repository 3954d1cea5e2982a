package lock_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// keysOnEachMaster returns, for each master of cl, a key whose lock lives
// there.
func keysOnEachMaster(t *testing.T, cl *redistest.Cluster, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	byMaster := map[string]string{}
	for i := 0; len(byMaster) < 3; i++ {
		if i > 1000 {
			t.Fatalf("keys landed on %d masters, want 3", len(byMaster))
		}
		key := fmt.Sprintf("%s:%d", prefix, i)
		srv, err := cl.MasterForKey(ctx, lockKey(key))
		must(t, "MasterForKey()", err)
		if _, ok := byMaster[srv.Addr()]; !ok {
			byMaster[srv.Addr()] = key
		}
	}
	return byMaster
}

// pubStats is what one node counted of pub/sub: PUBLISH and SPUBLISH calls
// (commandstats: also those run by scripts) and the publish messages it
// received over the cluster bus, classic and sharded (CLUSTER INFO).
type pubStats struct {
	publish, spublish, busPublish, busShard int
}

func (s pubStats) minus(o pubStats) pubStats {
	return pubStats{s.publish - o.publish, s.spublish - o.spublish, s.busPublish - o.busPublish, s.busShard - o.busShard}
}

// readPubStats returns the pubStats of every node of cl, by address.
func readPubStats(t *testing.T, cl *redistest.Cluster) map[string]pubStats {
	t.Helper()
	ctx := context.Background()
	out := map[string]pubStats{}
	for _, n := range cl.Nodes() {
		if !n.Running() {
			continue
		}
		var s pubStats
		var err error
		s.publish, err = n.CommandCalls(ctx, "publish")
		must(t, "CommandCalls(publish)", err)
		s.spublish, err = n.CommandCalls(ctx, "spublish")
		must(t, "CommandCalls(spublish)", err)
		rdb := redis.NewClient(&redis.Options{Addr: n.Addr()})
		info, err := rdb.ClusterInfo(ctx).Result()
		_ = rdb.Close()
		must(t, "CLUSTER INFO", err)
		s.busPublish = infoField(info, "cluster_stats_messages_publish_received")
		s.busShard = infoField(info, "cluster_stats_messages_publishshard_received")
		out[n.Addr()] = s
	}
	return out
}

// infoField reads an integer field of INFO-style text; 0 when absent (a
// counter the server has not needed yet is not listed).
func infoField(info, name string) int {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// wakeKind is one lock kind whose release publishes: hold takes key on c
// and returns its release; waiter is a lock of c that waits for key with a
// backoff of a minute, so that only a message wakes it within recv's 10s.
type wakeKind struct {
	name   string
	hold   func(t *testing.T, c *lock.Client, key string) func() error
	waiter func(c *lock.Client, key string) *lock.Lock
}

var slow = lock.WithBackoff(time.Minute, time.Minute)

func holdLock(l *lock.Lock) func(t *testing.T) func() error {
	return func(t *testing.T) func() error {
		must(t, "holder Acquire()", l.Acquire(context.Background()))
		return func() error { return l.Release(context.Background()) }
	}
}

var wakeKinds = []wakeKind{
	{"mutex", func(t *testing.T, c *lock.Client, key string) func() error { return holdLock(c.NewLock(key))(t) },
		func(c *lock.Client, key string) *lock.Lock { return c.NewLock(key, slow) }},
	{"mutex ReleaseWatch", func(t *testing.T, c *lock.Client, key string) func() error {
		return holdLock(c.NewLock(key, lock.WithReleaseMode(lock.ReleaseWatch)))(t)
	}, func(c *lock.Client, key string) *lock.Lock { return c.NewLock(key, slow) }},
	{"rwlock", func(t *testing.T, c *lock.Client, key string) func() error {
		return holdLock(c.NewRWLock(key).WriteLock())(t)
	},
		func(c *lock.Client, key string) *lock.Lock { return c.NewRWLock(key, slow).ReadLock() }},
	{"semaphore", func(t *testing.T, c *lock.Client, key string) func() error {
		return holdLock(c.NewSemaphore(key, 1).Permit())(t)
	}, func(c *lock.Client, key string) *lock.Lock { return c.NewSemaphore(key, 1, slow).Permit() }},
	{"fair", func(t *testing.T, c *lock.Client, key string) func() error {
		return holdLock(c.NewLock(key, lock.WithFair(true)))(t)
	}, func(c *lock.Client, key string) *lock.Lock { return c.NewLock(key, lock.WithFair(true), slow) }},
	{"multilock", func(t *testing.T, c *lock.Client, key string) func() error {
		m := c.NewMultiLock([]string{key})
		must(t, "holder MultiLock.Acquire()", m.Acquire(context.Background()))
		return func() error { return m.Release(context.Background()) }
	}, func(c *lock.Client, key string) *lock.Lock { return c.NewLock(key, slow) }},
}

// wantSharded fails unless the nodes, between before and after, published
// by SPUBLISH only, at least once on master, and passed no classic publish
// over the cluster bus.
func wantSharded(t *testing.T, before, after map[string]pubStats, master, what string) {
	t.Helper()
	for addr, b := range before {
		d := after[addr].minus(b)
		if d.publish != 0 || d.busPublish != 0 {
			t.Fatalf("%s: node %s ran %d PUBLISH and received %d classic bus publishes, want none", what, addr, d.publish, d.busPublish)
		}
		if addr == master && d.spublish == 0 {
			t.Fatalf("%s: the key's master %s ran no SPUBLISH", what, addr)
		}
	}
}

// TestShardedPubSub_wakesEveryKind: on a 3-master Redis Cluster (7.0 or
// later), a waiter in another Client (another process: no in-process
// handoff) on a key of each master is woken by the release's SPUBLISH, for
// every kind of lock whose release publishes, well before its one-minute
// backoff; no node runs a classic PUBLISH.
func TestShardedPubSub_wakesEveryKind(t *testing.T) {
	// Not parallel: it counts publishes server-wide on the shared cluster.
	cl := sharedCluster(t)
	holders := newClient(t, cl.Client(t))
	others := newClient(t, cl.Client(t))
	waitShardedPubSub(t, holders, others)
	for _, k := range wakeKinds {
		for master, key := range keysOnEachMaster(t, cl, keyFor(t)+":"+k.name) {
			what := k.name + " on " + master
			release := k.hold(t, holders, key)
			w := k.waiter(others, key)
			done := startAcquire(t, others, w, 1)
			before := readPubStats(t, cl)
			must(t, what+": Release()", release())
			must(t, what+": waiter Acquire()", recv(t, done, what+": waiter woken by SPUBLISH"))
			wantSharded(t, before, readPubStats(t, cl), master, what)
			must(t, what+": waiter Release()", w.Release(context.Background()))
		}
	}
	closeWithin(t, holders)
	closeWithin(t, others)
}

// TestShardedPubSub_idleSlotsClosed: a Client opens one sharded
// subscription per cluster slot it waits on. Once those channels have gone
// unused for the idle time, each such connection is closed, so a
// long-lived Client that waited on keys of many slots does not keep a
// connection per slot. A later wait on one of those keys subscribes afresh
// and is still woken by SPUBLISH.
func TestShardedPubSub_idleSlotsClosed(t *testing.T) {
	lock.SetNotifyIdle(t, 300*time.Millisecond) // before any Client starts
	cl := redistest.StartCluster(t, 3, 0)
	holders := newClient(t, cl.Client(t))
	others := newClient(t, cl.Client(t))
	wait := func(key, what string) {
		t.Helper()
		holder := holders.NewLock(key)
		must(t, what+": holder Acquire()", holder.Acquire(context.Background()))
		w := others.NewLock(key, slow)
		done := startAcquire(t, others, w, 1)
		must(t, what+": Release()", holder.Release(context.Background()))
		must(t, what+": waiter Acquire()", recv(t, done, what+": waiter woken by SPUBLISH"))
		must(t, what+": waiter Release()", w.Release(context.Background()))
	}
	var keys []string
	for _, key := range keysOnEachMaster(t, cl, keyFor(t)) {
		keys = append(keys, key)
		wait(key, key)
	}
	if n := lock.ShardedSubscriptions(others); n != len(keys) {
		t.Fatalf("%d sharded subscriptions after waits on %d slots, want one per slot", n, len(keys))
	}
	deadline := time.Now().Add(10 * time.Second)
	for lock.ShardedSubscriptions(others) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d sharded subscriptions still open 10s after their channels went idle, want 0", lock.ShardedSubscriptions(others))
		}
		time.Sleep(10 * time.Millisecond)
	}
	wait(keys[0], "after the idle close")
	closeWithin(t, holders)
	closeWithin(t, others)
}

// TestShardedPubSub_wakesOnceWaiter: Once's store publishes the outcome by
// SPUBLISH; a caller of another Client waiting on the same key gets it
// without running fn, on a key of each master.
func TestShardedPubSub_wakesOnceWaiter(t *testing.T) {
	// Not parallel: it counts publishes server-wide on the shared cluster.
	cl := sharedCluster(t)
	holders := newClient(t, cl.Client(t))
	others := newClient(t, cl.Client(t), slow)
	rdb := cl.Client(t)
	ctx := context.Background()
	for master, key := range keysOnEachMaster(t, cl, keyFor(t)) {
		proceed := make(chan struct{})
		first := make(chan error, 1)
		go func() {
			_, _, err := holders.Once(ctx, key, func(context.Context) ([]byte, error) {
				<-proceed
				return []byte(key), nil
			})
			first <- err
		}()
		deadline := time.Now().Add(10 * time.Second)
		for rdb.Exists(ctx, lockKey(key)).Val() == 0 {
			if time.Now().After(deadline) {
				t.Fatal("Once never took its lock")
			}
			time.Sleep(time.Millisecond)
		}
		second := make(chan error, 1)
		go func() {
			v, _, err := others.Once(ctx, key, func(context.Context) ([]byte, error) {
				return nil, fmt.Errorf("fn ran twice")
			})
			if err == nil && string(v) != key {
				err = fmt.Errorf("got %q, want %q", v, key)
			}
			second <- err
		}()
		waitIdle(t, others, key, 1)
		before := readPubStats(t, cl)
		close(proceed)
		must(t, "first Once()", recv(t, first, "first Once"))
		must(t, "waiting Once()", recv(t, second, "waiting Once woken by SPUBLISH"))
		wantSharded(t, before, readPubStats(t, cl), master, "Once on "+master)
	}
	closeWithin(t, holders)
	closeWithin(t, others)
}

// TestShardedPubSub_messagesPerRelease measures, on a 3-master cluster,
// what one release costs the cluster in pub/sub messages, classic (before)
// and sharded (after): PUBLISH reaches every node over the cluster bus,
// SPUBLISH stays on the key's shard (its replicas only; here none). It
// logs the figures quoted in docs/benchmarks.md and fails when sharded releases
// still cross the bus or classic ones do not.
func TestShardedPubSub_messagesPerRelease(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, 0)
	ctx := context.Background()
	const releases = 30
	for _, sharded := range []bool{false, true} {
		c := newClient(t, cl.Client(t))
		if !sharded {
			lock.ForceClassicPubSub(c)
		}
		mode := map[bool]string{false: "classic", true: "sharded"}[sharded]
		flushBus(t, cl)
		before := readPubStats(t, cl)
		for i := range releases {
			l := c.NewLock(fmt.Sprintf("%s:%s:%d", keyFor(t), mode, i))
			must(t, "Acquire()", l.Acquire(ctx))
			must(t, "Release()", l.Release(ctx))
		}
		flushBus(t, cl)
		after := readPubStats(t, cl)
		var sum pubStats
		for addr, b := range before {
			// Less flushBus's markers: one PUBLISH on each node, received
			// over the bus by every other node.
			d := after[addr].minus(b).minus(pubStats{publish: 1, busPublish: len(before) - 1})
			sum = pubStats{sum.publish + d.publish, sum.spublish + d.spublish, sum.busPublish + d.busPublish, sum.busShard + d.busShard}
		}
		nodes := len(before)
		t.Logf("%s: per release, over %d nodes: %.2f PUBLISH + %.2f SPUBLISH run, %.2f classic and %.2f sharded bus messages received (%.2f per node)",
			mode, nodes, float64(sum.publish)/releases, float64(sum.spublish)/releases,
			float64(sum.busPublish)/releases, float64(sum.busShard)/releases,
			float64(sum.busPublish+sum.busShard)/releases/float64(nodes))
		if sharded && (sum.publish != 0 || sum.busPublish != 0 || sum.spublish < releases) {
			t.Fatalf("sharded: %+v over %d releases, want SPUBLISH only, no bus traffic", sum, releases)
		}
		if !sharded && (sum.spublish != 0 || sum.busPublish == 0) {
			t.Fatalf("classic: %+v over %d releases, want PUBLISH crossing the bus", sum, releases)
		}
		closeWithin(t, c)
	}
}

// TestShardedPubSub_classicElsewhere: a single node (and anything but a
// ClusterClient) keeps classic pub/sub; the version check reads INFO
// server's text and counts what it cannot read as older.
func TestShardedPubSub_classicElsewhere(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	if lock.ShardedPubSub(newClient(t, tg.rdb)) {
		t.Fatal("a single node uses sharded pub/sub")
	}
	if lock.ShardedPubSub(&lock.Client{}) {
		t.Fatal("a zero Client uses sharded pub/sub")
	}
	for info, want := range map[string]bool{
		"# Server\r\nredis_version:7.0.15\r\n": true,
		"redis_version:8.2.1\n":                true,
		"redis_version:6.2.14\r\n":             false,
		"redis_version:\r\n":                   false,
		"# Server\r\n":                         false,
	} {
		if got := lock.AtLeast7(info); got != want {
			t.Errorf("AtLeast7(%q) = %v, want %v", info, got, want)
		}
	}
}

// flushBus returns once every node has received, over the cluster bus, a
// marker published on every other node after all that came before: the
// bus delivers each link's messages in order, so the counters read next
// miss no message still under way. Each call adds one PUBLISH on every
// node, received by each other node.
func flushBus(t *testing.T, cl *redistest.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const channel = "agentlock-test:bus-marker"
	nodes := cl.Nodes()
	var subs []*redis.PubSub
	for _, n := range nodes {
		rdb := redis.NewClient(&redis.Options{Addr: n.Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		ps := rdb.Subscribe(ctx, channel)
		t.Cleanup(func() { _ = ps.Close() })
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatalf("subscribe on %s: %v", n.Addr(), err)
		}
		subs = append(subs, ps)
	}
	for _, n := range nodes {
		rdb := redis.NewClient(&redis.Options{Addr: n.Addr()})
		err := rdb.Publish(ctx, channel, n.Addr()).Err()
		_ = rdb.Close()
		must(t, "PUBLISH marker", err)
	}
	for i, ps := range subs {
		got := map[string]bool{}
		for len(got) < len(nodes) {
			m, err := ps.ReceiveMessage(ctx)
			if err != nil {
				t.Fatalf("%s: markers %v of %d nodes: %v", nodes[i].Addr(), got, len(nodes), err)
			}
			got[m.Payload] = true
		}
	}
}

// migrateSlot moves slot from node from to node to, keys and all, the way
// redis-cli --cluster reshard does, and tells every node of nodes.
func migrateSlot(t *testing.T, slot int, from, to *redistest.Server, nodes []*redistest.Server) {
	t.Helper()
	ctx := context.Background()
	client := func(s *redistest.Server) *redis.Client {
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
	dstID := setMigrating(t, slot, from, to)
	src := client(from)
	keys, err := src.ClusterGetKeysInSlot(ctx, slot, 1000).Result()
	must(t, "GETKEYSINSLOT", err)
	if len(keys) > 0 {
		host, port, _ := strings.Cut(to.Addr(), ":")
		args := []any{"migrate", host, port, "", 0, 5000, "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		must(t, "MIGRATE", src.Do(ctx, args...).Err())
	}
	for _, n := range append([]*redistest.Server{to, from}, nodes...) {
		must(t, "SETSLOT NODE", client(n).Do(ctx, "cluster", "setslot", slot, "node", dstID).Err())
	}
}

// slotMove returns the master of key's slot (from), another master (to)
// and the slot, for migrateSlot.
func slotMove(t *testing.T, cl *redistest.Cluster, key string) (from, to *redistest.Server, slot int) {
	t.Helper()
	ctx := context.Background()
	from, err := cl.MasterForKey(ctx, lockKey(key))
	must(t, "MasterForKey()", err)
	for _, n := range cl.Nodes() {
		if n != from {
			to = n
			break
		}
	}
	slot = int(cl.Client(t).ClusterKeySlot(ctx, lockKey(key)).Val())
	return from, to, slot
}

// TestShardedPubSub_slotMigration: a waiter listens by SSUBSCRIBE on the
// master of its key's slot; the slot moves to another master while the key
// is held (the old master ends the subscription with SUNSUBSCRIBE). The
// waiter's Client subscribes afresh on the new master, and the release
// there wakes it by SPUBLISH, well before its one-minute backoff.
func TestShardedPubSub_slotMigration(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, 0)
	ctx := context.Background()
	holders := newClient(t, cl.Client(t))
	others := newClient(t, cl.Client(t))
	waitShardedPubSub(t, holders, others)
	key := keyFor(t)
	from, to, slot := slotMove(t, cl, key)
	channel := lockKey(key) + ":notify"

	holder := holders.NewLock(key)
	must(t, "holder Acquire()", holder.Acquire(ctx))
	w := others.NewLock(key, slow)
	done := startAcquire(t, others, w, 1)
	waitShardSubscribed(t, from, channel)

	migrateSlot(t, slot, from, to, cl.Nodes())
	wakeOnNewMaster(t, cl, to, holders, others, holder, w, done, "after the migration")
}

// wakeOnNewMaster waits until w's Client listens on master, the key's new
// master, then releases holder and wants w woken there by SPUBLISH.
func wakeOnNewMaster(t *testing.T, cl *redistest.Cluster, master *redistest.Server, holders, others *lock.Client, holder, w *lock.Lock, done <-chan error, what string) {
	t.Helper()
	ctx := context.Background()
	waitShardSubscribed(t, master, lockKey(w.Key())+":notify")
	waitIdle(t, others, w.Key(), 1)
	before := readPubStats(t, cl)
	must(t, what+": holder Release()", holder.Release(ctx))
	must(t, what+": waiter Acquire()", recv(t, done, what+": waiter woken by SPUBLISH on the new master"))
	wantSharded(t, before, readPubStats(t, cl), master.Addr(), what)
	must(t, what+": waiter Release()", w.Release(ctx))
	closeWithin(t, holders)
	closeWithin(t, others)
}

// waitShardedPubSub waits until each Client has settled on sharded pub/sub.
// A Client's check (INFO on every master, one SPUBLISH) may not finish in
// time on a cluster just started under load; the Client then publishes
// classically, and subscribes nowhere, until a later check passes.
func waitShardedPubSub(t *testing.T, clients ...*lock.Client) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, c := range clients {
		for !lock.ShardedPubSub(c) {
			if time.Now().After(deadline) {
				t.Fatal("a ClusterClient on Redis >= 7.0 does not use sharded pub/sub after 20s")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// waitShardSubscribed waits until node counts a sharded subscriber of
// channel (PUBSUB SHARDNUMSUB).
func waitShardSubscribed(t *testing.T, node *redistest.Server, channel string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: node.Addr()})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := rdb.PubSubShardNumSub(context.Background(), channel).Result()
		if err == nil && n[channel] > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no sharded subscriber of %s (%v, %v)", node.Addr(), channel, n, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitRoutes waits until rdb sends key's commands to node. A cluster
// client learns of a failover from its periodic slot map reload, not from a
// refused connection, and a Release is sent once: one sent through a stale
// map fails on the dead master.
func waitRoutes(t *testing.T, rdb *redis.ClusterClient, key string, node *redistest.Server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := rdb.MasterForKey(context.Background(), key)
		if err == nil && c.Options().Addr == node.Addr() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster client does not route %s to %s after 10s (%v, %v)", key, node.Addr(), c, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestShardedPubSub_failover: the master a waiter listens on dies and its
// replica takes over; the waiter's Client subscribes afresh on the new
// master, and the release there wakes it by SPUBLISH, well before its
// one-minute backoff. The holder's acquire was acknowledged by the replica
// (WithReplicaAck), so the key survives the failover.
func TestShardedPubSub_failover(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, 1)
	ctx := context.Background()
	hrdb := cl.Client(t)
	holders := newClient(t, hrdb)
	others := newClient(t, cl.Client(t))
	waitShardedPubSub(t, holders, others)
	key := keyFor(t)
	master, err := cl.MasterForKey(ctx, lockKey(key))
	must(t, "MasterForKey()", err)
	channel := lockKey(key) + ":notify"

	holder := holders.NewLock(key, lock.WithReplicaAck(1, 5*time.Second))
	must(t, "holder Acquire()", holder.Acquire(ctx))
	w := others.NewLock(key, slow)
	done := startAcquire(t, others, w, 1)
	waitShardSubscribed(t, master, channel)

	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	promoted, err := cl.KillMasterAndWaitFailover(fctx, master)
	must(t, "KillMasterAndWaitFailover()", err)
	waitRoutes(t, hrdb, lockKey(key), promoted)
	wakeOnNewMaster(t, cl, promoted, holders, others, holder, w, done, "after the failover")
}

// TestShardedPubSub_deniedByACL: a user whose ACL refuses SPUBLISH keeps
// classic pub/sub (a release script would fail on SPUBLISH), and its
// waiters are still woken, by PUBLISH.
func TestShardedPubSub_deniedByACL(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, 0)
	ctx := context.Background()
	for _, n := range cl.Nodes() {
		rdb := redis.NewClient(&redis.Options{Addr: n.Addr()})
		err := rdb.Do(ctx, "acl", "setuser", "locker", "on", ">pw", "~*", "&*", "+@all", "-spublish").Err()
		_ = rdb.Close()
		must(t, "ACL SETUSER", err)
	}
	user := func() *redis.ClusterClient {
		opt := cl.ClusterOptions()
		opt.Username, opt.Password = "locker", "pw"
		rdb := redis.NewClusterClient(opt)
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
	holders, others := newClient(t, user()), newClient(t, user())
	if lock.ShardedPubSub(holders) {
		t.Fatal("sharded pub/sub for a user without SPUBLISH")
	}
	key := keyFor(t)
	holder := holders.NewLock(key)
	must(t, "holder Acquire()", holder.Acquire(ctx))
	w := others.NewLock(key, slow)
	done := startAcquire(t, others, w, 1)
	must(t, "holder Release()", holder.Release(ctx))
	must(t, "waiter Acquire()", recv(t, done, "waiter woken by PUBLISH"))
	must(t, "waiter Release()", w.Release(ctx))
	closeWithin(t, holders)
	closeWithin(t, others)
}
