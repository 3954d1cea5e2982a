package lock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/luascripts"
	"github.com/agentlock/lock/internal/redistest"
)

// eachShardedDeployment runs fn where a MultiLock's keys fall into several
// slot groups, one call each: a *redis.Ring of two real servers (a group
// per key) and a real 3-master Redis Cluster (a group per slot).
func eachShardedDeployment(t *testing.T, fn func(t *testing.T, d deployment)) {
	t.Helper()
	t.Run("ring", func(t *testing.T) {
		a, b := redistest.Start(t, redistest.Config{}), redistest.Start(t, redistest.Config{})
		fn(t, deployment{name: "ring", admin: newRing(t, a, b), newRDB: func(t *testing.T) redis.UniversalClient {
			return newRing(t, a, b)
		}})
	})
	t.Run("cluster", func(t *testing.T) {
		cl := sharedCluster(t)
		fn(t, deployment{name: "cluster", admin: cl.Client(t), newRDB: func(t *testing.T) redis.UniversalClient {
			return cl.Client(t)
		}})
	})
}

// fault is what a groupFaults hook does with one script call.
type fault int

const (
	pass fault = iota // send it
	fail              // fail it unsent, as a refused connection does
	drop              // send it, then lose its reply
)

// errDropped is the error of a call whose reply a groupFaults hook lost.
var errDropped = fmt.Errorf("test: reply lost: %w", syscall.ECONNRESET)

// groupFaults is a go-redis hook on a MultiLock's script calls, sent alone
// or in a pipeline: decide gets each call's operation, told by the KEYS
// multi_*.lua take ("acquire": lock and fence pairs, "release": lock and
// notify pairs, "extend": locks), and its KEYS, and says what to do with
// it. decide may block; the call then waits.
type groupFaults struct {
	decide func(op string, keys []string) fault
}

// scriptCall returns the operation and KEYS of cmd, a script call; ok is
// false for any other command.
func scriptCall(cmd redis.Cmder) (op string, keys []string, ok bool) {
	args := cmd.Args()
	name := strings.ToLower(cmd.Name())
	if (name != "eval" && name != "evalsha") || len(args) < 3 {
		return "", nil, false
	}
	n, err := strconv.Atoi(fmt.Sprint(args[2]))
	if err != nil || len(args) < 3+n {
		return "", nil, false
	}
	for _, k := range args[3 : 3+n] {
		keys = append(keys, fmt.Sprint(k))
	}
	switch script := fmt.Sprint(args[1]); {
	case script == luascripts.MultiExtend.Hash() || script == luascripts.MultiExtendSrc:
		op = "extend" // its KEYS pair each lock with its fence counter
	case n >= 2 && strings.HasSuffix(keys[1], ":fence"):
		op = "acquire"
	case n >= 2 && strings.HasSuffix(keys[1], ":notify"):
		op = "release"
	default:
		op = "extend"
	}
	return op, keys, true
}

func (h *groupFaults) judge(cmd redis.Cmder) fault {
	if op, keys, ok := scriptCall(cmd); ok {
		return h.decide(op, keys)
	}
	return pass
}

func (h *groupFaults) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *groupFaults) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch h.judge(cmd) {
		case fail:
			cmd.SetErr(syscall.ECONNREFUSED)
			return syscall.ECONNREFUSED
		case drop:
			if err := next(ctx, cmd); err != nil {
				return err
			}
			cmd.SetErr(errDropped)
			return errDropped
		}
		return next(ctx, cmd)
	}
}

func (h *groupFaults) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var send, failed, dropped []redis.Cmder
		for _, cmd := range cmds {
			switch h.judge(cmd) {
			case fail:
				failed = append(failed, cmd)
			case drop:
				dropped = append(dropped, cmd)
				send = append(send, cmd)
			default:
				send = append(send, cmd)
			}
		}
		var err error
		if len(send) > 0 {
			err = next(ctx, send)
		}
		for _, cmd := range failed {
			cmd.SetErr(syscall.ECONNREFUSED)
		}
		for _, cmd := range dropped {
			cmd.SetErr(errDropped)
		}
		if err == nil && len(failed)+len(dropped) > 0 {
			err = syscall.ECONNRESET
		}
		return err
	}
}

// has reports whether the KEYS of a call name key's lock.
func has(keys []string, key string) bool { return slices.Contains(keys, lockKey(key)) }

// wantNoMember fails the test if a member of keys is in Redis, naming what
// should have freed it.
func wantNoMember(t *testing.T, admin redis.UniversalClient, keys []string, what string) {
	t.Helper()
	for _, k := range keys {
		if v, err := admin.Get(context.Background(), lockKey(k)).Result(); err != redis.Nil {
			t.Fatalf("member %s held %s: GET = %q, %v; PTTL %v", k, what, v, err, admin.PTTL(context.Background(), lockKey(k)).Val())
		}
	}
}

// eventuallyNoMember waits, up to 10s, until no member of keys is in Redis:
// a release sent again in the background.
func eventuallyNoMember(t *testing.T, admin redis.UniversalClient, keys []string, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := 0
		for _, k := range keys {
			n += int(admin.Exists(context.Background(), lockKey(k)).Val())
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			wantNoMember(t, admin, keys, what+" (10s on)")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMultiLock_Acquire_holdsNoMemberBetweenAttempts: while a waiting
// MultiLock's later (or first) slot group fails — its call refused unsent,
// or sent and its reply lost — the waiter holds no member between
// attempts: a hook holds the next attempt's first call until the test has
// looked, and another client can take the first member meanwhile. When the
// release of the first group fails too, it is sent again in the
// background. Once the group mends, the Acquire takes every member.
func TestMultiLock_Acquire_holdsNoMemberBetweenAttempts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		first   bool  // the first slot group fails, not the last
		mode    fault // how its acquire fails
		release fault // what befalls the first release of the first group
	}{
		{name: "last refused", mode: fail},
		{name: "last reply lost", mode: drop},
		{name: "first reply lost", first: true, mode: drop},
		{name: "last refused, release fails", mode: fail, release: fail},
	}
	eachShardedDeployment(t, func(t *testing.T, d deployment) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				rdb := d.newRDB(t)
				h := &groupFaults{decide: func(string, []string) fault { return pass }}
				rdb.AddHook(h)
				c := newClient(t, rdb, lock.WithTTL(time.Minute), lock.WithBackoff(time.Millisecond, 5*time.Millisecond))
				m := c.NewMultiLock(multiKeys(t, 3))
				// Load the scripts on every node first.
				must(t, "Acquire()", m.Acquire(ctx))
				must(t, "Release()", m.Release(ctx))
				ord := m.Keys()
				bad := ord[len(ord)-1]
				if tc.first {
					bad = ord[0]
				}
				decide, between, resume := pauseAt(ord[0], 2, onceEach(map[string]fault{
					"acquire " + bad:    tc.mode,
					"release " + ord[0]: tc.release,
				}))
				defer resume() // a failed check must not leave the Acquire blocked
				h.decide = decide
				done := make(chan error, 1)
				go func() { done <- m.Acquire(ctx) }()
				waitPaused(t, ctx, between, done)
				if tc.release != pass {
					eventuallyNoMember(t, d.admin, ord, "between attempts, its release failed once")
				} else {
					wantNoMember(t, d.admin, ord, "between attempts")
				}
				other := newClient(t, d.newRDB(t)).NewLock(ord[0])
				if ok, err := other.TryAcquire(ctx); !ok || err != nil {
					t.Fatalf("another client's TryAcquire(%s) between attempts = %v, %v, want true, nil", ord[0], ok, err)
				}
				must(t, "other's Release()", other.Release(ctx))
				resume()
				must(t, "Acquire()", <-done)
				for _, k := range ord {
					if got := d.admin.Get(ctx, lockKey(k)).Val(); got != m.Token() {
						t.Fatalf("GET %s = %q, want the multi-lock's token", k, got)
					}
				}
				must(t, "Release()", m.Release(ctx))
			})
		}
	})
}

// TestMultiLock_TryAcquire_backsOut: a TryAcquire whose last slot group
// fails reports the error holding no member; when the release of the
// first group fails as well, that release is sent again in the
// background.
func TestMultiLock_TryAcquire_backsOut(t *testing.T) {
	t.Parallel()
	eachShardedDeployment(t, func(t *testing.T, d deployment) {
		for _, releaseFails := range []bool{false, true} {
			t.Run(fmt.Sprint("releaseFails=", releaseFails), func(t *testing.T) {
				ctx := context.Background()
				rdb := d.newRDB(t)
				h := &groupFaults{decide: func(string, []string) fault { return pass }}
				rdb.AddHook(h)
				m := newClient(t, rdb, lock.WithTTL(time.Minute)).NewMultiLock(multiKeys(t, 3))
				must(t, "Acquire()", m.Acquire(ctx))
				must(t, "Release()", m.Release(ctx))
				ord := m.Keys()
				faults := map[string]fault{"acquire " + ord[len(ord)-1]: drop}
				if releaseFails {
					faults["release "+ord[0]] = fail
				}
				h.decide = onceEach(faults)
				ok, err := m.TryAcquire(ctx)
				if ok || !errors.Is(err, syscall.ECONNRESET) {
					t.Fatalf("TryAcquire() = %v, %v, want false and the lost reply", ok, err)
				}
				if releaseFails {
					eventuallyNoMember(t, d.admin, ord, "after TryAcquire, its release failed once")
				} else {
					wantNoMember(t, d.admin, ord, "after a failed TryAcquire")
				}
			})
		}
	})
}

// TestMultiLock_Extend_lostReleasesEveryMember: with one member deleted,
// Extend(10m) reports ErrNotHeld, Lost() is closed, and no other member is
// left held (with the 10m TTL the Extend gave its slot group), whichever
// member was gone.
func TestMultiLock_Extend_lostReleasesEveryMember(t *testing.T) {
	t.Parallel()
	eachShardedDeployment(t, func(t *testing.T, d deployment) {
		ctx := context.Background()
		c := newClient(t, d.newRDB(t), lock.WithTTL(time.Minute))
		m := c.NewMultiLock(multiKeys(t, 3))
		for _, gone := range m.Keys() {
			must(t, "Acquire()", m.Acquire(ctx))
			d.admin.Del(ctx, lockKey(gone))
			wantErr(t, "Extend(10m)", m.Extend(ctx, 10*time.Minute), lock.ErrNotHeld)
			select {
			case <-m.Lost():
			default:
				t.Fatal("Lost() open after Extend() found a member gone")
			}
			wantNoMember(t, d.admin, m.Keys(), "after Extend() found "+gone+" gone")
		}
	})
}

// TestMultiLock_renewal_lostReleasesEveryMember: with one member deleted,
// the renewal that finds it gone releases the other members (which that
// same renewal extended) before Lost() closes.
func TestMultiLock_renewal_lostReleasesEveryMember(t *testing.T) {
	t.Parallel()
	eachShardedDeployment(t, func(t *testing.T, d deployment) {
		ctx := context.Background()
		ttl := 3 * time.Second
		m := newClient(t, d.newRDB(t), lock.WithTTL(ttl)).NewMultiLock(multiKeys(t, 3))
		must(t, "Acquire()", m.Acquire(ctx))
		gone := m.Keys()[1]
		d.admin.Del(ctx, lockKey(gone))
		waitClosed(t, m.Lost(), ttl, "Lost()")
		wantErr(t, "LostErr()", m.LostErr(), lock.ErrLockLost)
		wantNoMember(t, d.admin, m.Keys(), "once Lost() closed ("+gone+" deleted)")
	})
}

// pauseAt returns a decide func for a groupFaults hook, and the channels
// of its pause: the n-th acquire call of key's slot group (counting from
// the time decide is set) waits until resume closes, after closing
// between. Every other call goes on as other says.
func pauseAt(key string, n int, other func(op string, keys []string) fault) (decide func(string, []string) fault, between <-chan struct{}, resume func()) {
	var mu sync.Mutex
	calls := 0
	b, r := make(chan struct{}), make(chan struct{})
	var once sync.Once
	decide = func(op string, keys []string) fault {
		mu.Lock()
		if op == "acquire" && has(keys, key) {
			calls++
			if calls == n {
				mu.Unlock()
				close(b)
				<-r
				return pass
			}
		}
		mu.Unlock()
		return other(op, keys)
	}
	return decide, b, func() { once.Do(func() { close(r) }) }
}

// onceEach returns a decide func for a groupFaults hook that does, to the
// first call of each "op key" of faults (op "acquire" or "release", key a
// member whose slot group the call is for), what faults says, and passes
// every other call.
func onceEach(faults map[string]fault) func(op string, keys []string) fault {
	var mu sync.Mutex
	done := map[string]bool{}
	return func(op string, keys []string) fault {
		mu.Lock()
		defer mu.Unlock()
		for what, f := range faults {
			op1, key, _ := strings.Cut(what, " ")
			if op == op1 && has(keys, key) && !done[what] {
				done[what] = true
				return f
			}
		}
		return pass
	}
}

// waitPaused waits until a hook's pause begins (between closes), failing
// the test if the Acquire ends first (its error on done) or ctx does.
func waitPaused(t *testing.T, ctx context.Context, between <-chan struct{}, done <-chan error) {
	t.Helper()
	select {
	case <-between:
	case err := <-done:
		t.Fatalf("Acquire() = %v before the hook paused it", err)
	case <-ctx.Done():
		t.Fatal("the hook did not pause the Acquire before the test's deadline")
	}
}

// TestMultiLock_Acquire_deadMaster: on a 3-master cluster, with the master
// of the later slot group killed, a waiting MultiLock holds nothing on the
// healthy master between attempts (the next attempt is held by a hook
// while the test looks): another client takes that member. Once the wait
// ends, nothing is held either.
func TestMultiLock_Acquire_deadMaster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, 0, "--cluster-require-full-coverage", "no")
	admin := cl.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Two keys on two masters.
	var keys []string
	var masters []*redistest.Server
	for i := 0; len(keys) < 2; i++ {
		k := fmt.Sprintf("%s:%d", keyFor(t), i)
		srv, err := cl.MasterForKey(ctx, lockKey(k))
		must(t, "MasterForKey()", err)
		if len(keys) == 0 || srv != masters[0] {
			keys, masters = append(keys, k), append(masters, srv)
		}
	}
	rdb := cl.Client(t)
	h := &groupFaults{decide: func(string, []string) fault { return pass }}
	rdb.AddHook(h)
	c := newClient(t, rdb, lock.WithTTL(time.Minute), lock.WithBackoff(time.Millisecond, 5*time.Millisecond))
	m := c.NewMultiLock(keys)
	must(t, "Acquire()", m.Acquire(ctx))
	must(t, "Release()", m.Release(ctx))
	ord := m.Keys()
	masters[slices.Index(keys, ord[1])].Kill()

	decide, between, resume := pauseAt(ord[0], 2, func(string, []string) fault { return pass })
	defer resume()
	h.decide = decide
	actx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- m.Acquire(actx) }()
	waitPaused(t, ctx, between, done)
	wantNoMember(t, admin, ord[:1], "between attempts, with the master of "+ord[1]+" dead")
	other := newClient(t, cl.Client(t)).NewLock(ord[0])
	if ok, err := other.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("another client's TryAcquire(%s) = %v, %v, want true, nil", ord[0], ok, err)
	}
	must(t, "other's Release()", other.Release(ctx))
	stop()
	resume()
	wantErr(t, "Acquire()", <-done, lock.ErrNotAcquired)
	wantNoMember(t, admin, ord[:1], "after the Acquire gave up")
}

// TestMultiLock_forceReleasedMember: an operator force-releases one
// member of a held MultiLock; the hold is lost (by the force message, or
// by the next renewal) and the other members are released, not left held
// until their TTL runs out.
func TestMultiLock_forceReleasedMember(t *testing.T) {
	t.Parallel()
	eachShardedDeployment(t, func(t *testing.T, d deployment) {
		ctx := context.Background()
		// The hold is lost by the force message or, where it does not
		// come, by the next renewal (TTL/3), within ttl/2 either way.
		ttl := 6 * time.Second
		m := newClient(t, d.newRDB(t), lock.WithTTL(ttl)).NewMultiLock(multiKeys(t, 3))
		ops := newClient(t, d.newRDB(t))
		for _, k := range m.Keys() {
			must(t, "Acquire()", m.Acquire(ctx))
			must(t, "ForceRelease()", ops.ForceRelease(ctx, k))
			waitClosed(t, m.Lost(), ttl/2, "Lost()")
			eventuallyNoMember(t, d.admin, m.Keys(), "after "+k+" was force-released")
			wantErr(t, "Release()", m.Release(ctx), lock.ErrNotHeld)
		}
	})
}

// TestMultiLock_closeDuringWait: a Client closed while its MultiLock waits
// (its last slot group refused, the next attempt held by a hook) ends the
// Acquire with ErrClosed, holding no member.
func TestMultiLock_closeDuringWait(t *testing.T) {
	t.Parallel()
	eachShardedDeployment(t, func(t *testing.T, d deployment) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rdb := d.newRDB(t)
		h := &groupFaults{decide: func(string, []string) fault { return pass }}
		rdb.AddHook(h)
		c := lock.NewClient(rdb, lock.WithTTL(time.Minute), lock.WithBackoff(time.Millisecond, 5*time.Millisecond))
		m := c.NewMultiLock(multiKeys(t, 3))
		ord := m.Keys()
		last := ord[len(ord)-1]
		decide, between, resume := pauseAt(ord[0], 2, func(op string, keys []string) fault {
			if op == "acquire" && has(keys, last) {
				return fail
			}
			return pass
		})
		defer resume()
		h.decide = decide
		done := make(chan error, 1)
		go func() { done <- m.Acquire(ctx) }()
		waitPaused(t, ctx, between, done)
		closed := make(chan error, 1)
		go func() { closed <- c.Close() }()
		resume()
		wantErr(t, "Acquire()", <-done, lock.ErrClosed)
		must(t, "Close()", <-closed)
		wantNoMember(t, d.admin, ord, "after Close() ended the wait")
	})
}

// TestMultiLock_Release_failedGroupSentAgain: a Release whose call for one
// slot group fails returns that error, and the group is released again in
// the background rather than left held until its TTL.
func TestMultiLock_Release_failedGroupSentAgain(t *testing.T) {
	t.Parallel()
	eachShardedDeployment(t, func(t *testing.T, d deployment) {
		ctx := context.Background()
		rdb := d.newRDB(t)
		h := &groupFaults{decide: func(string, []string) fault { return pass }}
		rdb.AddHook(h)
		m := newClient(t, rdb, lock.WithTTL(time.Minute)).NewMultiLock(multiKeys(t, 3))
		must(t, "Acquire()", m.Acquire(ctx))
		ord := m.Keys()
		h.decide = onceEach(map[string]fault{"release " + ord[1]: fail})
		if err := m.Release(ctx); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("Release() error = %v, want the refused call's", err)
		}
		eventuallyNoMember(t, d.admin, ord, "after a Release whose call for "+ord[1]+" failed")
	})
}

// landsAfterDeadline is a go-redis hook whose acquire calls for key's slot
// group wait until their context ends, then reach Redis all the same and
// report the context's error: a call on the wire when the deadline hit.
type landsAfterDeadline struct{ key string }

func (h landsAfterDeadline) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h landsAfterDeadline) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if op, keys, ok := scriptCall(cmd); !ok || op != "acquire" || !has(keys, h.key) {
			return next(ctx, cmd)
		}
		<-ctx.Done()
		if err := next(context.WithoutCancel(ctx), cmd); err != nil {
			return err
		}
		cmd.SetErr(ctx.Err())
		return ctx.Err()
	}
}

func (h landsAfterDeadline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestMultiLock_Acquire_deadlineDuringAttempt: the Acquire's deadline ends
// while the last slot group's call is out, and that call takes the group
// all the same. Acquire returns ErrNotAcquired by its deadline (plus
// slack), and every member, the last group's too, is released.
func TestMultiLock_Acquire_deadlineDuringAttempt(t *testing.T) {
	t.Parallel()
	eachShardedDeployment(t, func(t *testing.T, d deployment) {
		rdb := d.newRDB(t)
		m := newClient(t, rdb, lock.WithTTL(time.Minute)).NewMultiLock(multiKeys(t, 3))
		must(t, "Acquire()", m.Acquire(context.Background()))
		must(t, "Release()", m.Release(context.Background()))
		ord := m.Keys()
		rdb.AddHook(landsAfterDeadline{key: ord[len(ord)-1]})
		const wait = 300 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		start := time.Now()
		wantErr(t, "Acquire()", m.Acquire(ctx), lock.ErrNotAcquired)
		if took := time.Since(start); took > wait+2*time.Second {
			t.Fatalf("Acquire() returned %v after its %v deadline", took-wait, wait)
		}
		eventuallyNoMember(t, d.admin, ord, "after the deadline ended an attempt")
	})
}

// TestMultiLock_forceReleasedMidAttempt: an operator force-releases the
// first member while the attempt that took it is still taking the last
// slot group (a hook holds that call). The Acquire succeeds, as a Lock's
// does when a force-release lands before its hold is installed; the first
// renewal finds the member gone, and then no member is left held.
func TestMultiLock_forceReleasedMidAttempt(t *testing.T) {
	t.Parallel()
	eachShardedDeployment(t, func(t *testing.T, d deployment) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rdb := d.newRDB(t)
		h := &groupFaults{decide: func(string, []string) fault { return pass }}
		rdb.AddHook(h)
		ttl := 3 * time.Second
		m := newClient(t, rdb, lock.WithTTL(ttl)).NewMultiLock(multiKeys(t, 3))
		ord := m.Keys()
		decide, between, resume := pauseAt(ord[len(ord)-1], 1, func(string, []string) fault { return pass })
		defer resume()
		h.decide = decide
		done := make(chan error, 1)
		go func() { done <- m.Acquire(ctx) }()
		waitPaused(t, ctx, between, done)
		must(t, "ForceRelease()", newClient(t, d.newRDB(t)).ForceRelease(ctx, ord[0]))
		resume()
		must(t, "Acquire()", <-done)
		waitClosed(t, m.Lost(), ttl, "Lost()")
		wantNoMember(t, d.admin, ord, "once Lost() closed ("+ord[0]+" force-released mid-attempt)")
	})
}

// TestMultiLock_deadlineLossReleasesMembers: the renewals of the last
// slot group fail (a hook refuses them) while the other groups' succeed,
// so the hold is lost at its safety deadline, with the first member just
// extended by the last renewal. That loss sends the release of every
// member, rather than leaving the first held for up to another TTL.
func TestMultiLock_deadlineLossReleasesMembers(t *testing.T) {
	t.Parallel()
	eachShardedDeployment(t, func(t *testing.T, d deployment) {
		ctx := context.Background()
		rdb := d.newRDB(t)
		h := &groupFaults{decide: func(string, []string) fault { return pass }}
		rdb.AddHook(h)
		ttl := 3 * time.Second
		m := newClient(t, rdb, lock.WithTTL(ttl)).NewMultiLock(multiKeys(t, 3))
		ord := m.Keys()
		released := make(chan struct{})
		var once sync.Once
		h.decide = func(op string, keys []string) fault {
			switch {
			case op == "extend" && has(keys, ord[len(ord)-1]):
				return fail
			case op == "release" && has(keys, ord[0]):
				once.Do(func() { close(released) })
			}
			return pass
		}
		must(t, "Acquire()", m.Acquire(ctx))
		waitClosed(t, m.Lost(), 2*ttl, "Lost()")
		waitClosed(t, released, 10*time.Second, "the release of "+ord[0]+" after the loss")
		eventuallyNoMember(t, d.admin, ord, "after the hold was lost at its deadline")
	})
}

// TestMultiLock_forceReleasedMember_missedMessage: a MultiLock whose
// Client does not listen for force messages (WithNotify(false)) has one
// member force-released; the Extend, the renewal or the Release that finds
// the member gone reports the hold lost as force-released, from the
// member's force record, not as vanished.
func TestMultiLock_forceReleasedMember_missedMessage(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	ops := newClient(t, tg.rdb)
	for _, tc := range []struct {
		verb string
		ttl  time.Duration
	}{{"Extend", 30 * time.Second}, {"renewal", time.Second}, {"Release", 30 * time.Second}} {
		c := newClient(t, tg.rdb, lock.WithTTL(tc.ttl), lock.WithNotify(false))
		m := c.NewMultiLock(multiKeys(t, 3))
		must(t, "Acquire()", m.Acquire(ctx))
		must(t, "ForceRelease()", ops.ForceRelease(ctx, m.Keys()[1]))
		switch tc.verb {
		case "Extend":
			wantErr(t, "Extend()", m.Extend(ctx, tc.ttl), lock.ErrNotHeld)
		case "Release":
			wantErr(t, "Release()", m.Release(ctx), lock.ErrNotHeld)
		}
		waitClosed(t, m.Lost(), 10*time.Second, "Lost() after the "+tc.verb)
		var le *lock.LostError
		if !errors.As(m.LostErr(), &le) || le.Reason != lock.LossForceReleased {
			t.Errorf("%s: LostErr() = %v, want reason %v", tc.verb, m.LostErr(), lock.LossForceReleased)
		}
		eventuallyNoMember(t, tg.rdb, m.Keys(), "after the "+tc.verb)
	}
}
