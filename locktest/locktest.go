package locktest

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// Controller injects faults into the Redis behind a [lock.Client] made by
// [New]: it expires, steals or force-releases a held key, pauses renewals,
// and makes Redis unreachable or slow. Keys are the caller's keys, as given
// to NewLock or WithLock; the prefix of New's options is applied for them.
//
// Its methods are safe for concurrent use. Every fault ends with the test:
// New's cleanup resumes renewals and restores the network before it closes
// the clients. A zero Controller injects nothing: its key methods return an
// error wrapping [lock.ErrInvalid], the others do nothing.
type Controller struct {
	m      *miniredis.Miniredis
	p      *proxy
	g      *gate
	rdb    *redis.Client // through the proxy, with the gate: the client under test
	admin  *redis.Client // straight to the server: the controller's own calls
	ops    *lock.Client  // over admin, with New's options but no Observer: reads the prefix; a lock.Client for operator calls
	prefix string
	thief  atomic.Int64 // numbers the tokens of Steal
}

// TB is the part of [testing.TB] that [New] uses: *testing.T, *testing.B
// and *testing.F satisfy it.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

var _ TB = testing.TB(nil)

// New starts an embedded Redis (miniredis) behind an in-process TCP proxy
// on a loopback port, a go-redis client through that proxy, and a
// [lock.Client] over it with opts as its defaults. It returns that client
// and the [Controller] of its faults. Everything is closed by t's cleanup,
// which waits for every goroutine New started; closing the client earlier
// is allowed (Close is idempotent).
//
// Invalid opts are reported as lock.NewClient reports them: every verb of
// the client returns an error wrapping [lock.ErrInvalid]. New fails t only
// when it cannot start the server or the proxy. A nil t gives a client and
// a zero Controller whose calls return errors wrapping lock.ErrInvalid.
//
// miniredis keeps its TTLs still until told otherwise, so a hold never
// expires on its own here: use [Controller.Expire], or advance every TTL
// with [Controller.Miniredis]().FastForward.
func New(t TB, opts ...lock.Option) (*lock.Client, *Controller) {
	if t == nil {
		// Nobody to report to: a client and a Controller whose every call
		// fails with lock.ErrInvalid.
		return lock.NewClient(nil), new(Controller)
	}
	t.Helper()
	m, err := miniredis.Run()
	if err != nil {
		t.Fatalf("locktest: embedded redis: %v", err)
	}
	t.Cleanup(m.Close) // registered first: runs last
	locks, c := newOn(t, m.Addr(), opts)
	c.m = m
	return locks, c
}

// newOn is New on the Redis at addr, which t's cleanup leaves running.
func newOn(t TB, addr string, opts []lock.Option) (*lock.Client, *Controller) {
	t.Helper()
	p, err := newProxy(addr)
	if err != nil {
		t.Fatalf("locktest: proxy: %v", err)
	}
	t.Cleanup(p.close)
	c := &Controller{p: p, g: new(gate)}
	c.rdb = redis.NewClient(&redis.Options{Addr: p.addr()})
	c.rdb.AddHook(c.g)
	t.Cleanup(func() { _ = c.rdb.Close() })
	c.admin = redis.NewClient(&redis.Options{Addr: addr})
	c.admin.AddHook(probe{})
	t.Cleanup(func() { _ = c.admin.Close() })

	// The probe is no event of the user's: no Observer, no logger.
	c.ops = lock.NewClient(c.admin, append(opts[:len(opts):len(opts)], lock.WithObserver(nil), lock.WithLogger(nil))...)
	t.Cleanup(func() { _ = c.ops.Close() })
	c.prefix = lock.DefaultPrefix
	if p, err := prefixOf(c.ops); err == nil {
		c.prefix = p
	}

	locks := lock.NewClient(c.rdb, opts...)
	t.Cleanup(func() { _ = locks.Close() })
	t.Cleanup(c.heal) // runs first: the clients close on a healthy network
	return locks, c
}

// heal lifts every fault.
func (c *Controller) heal() {
	c.ResumeRenewals()
	c.Restore()
}

// errZero is what the key methods of a zero Controller return.
var errZero = fmt.Errorf("locktest: zero Controller: make one with New: %w", lock.ErrInvalid)

func (c *Controller) zero() bool { return c == nil || c.p == nil }

// keys returns the Redis keys of the lock on key.
func (c *Controller) keys(key string) luascripts.Keys {
	return luascripts.NewKeys(c.prefix, key)
}

// RedisKey returns the Redis key that holds the lock on key (prefix, then
// key in braces, as "lock:{key}"), for looking at it through
// [Controller.Miniredis]. A zero Controller returns "".
func (c *Controller) RedisKey(key string) string {
	if c.zero() {
		return ""
	}
	k := c.keys(key)
	return k.Lock()
}

// Redis returns the go-redis client the lock.Client of New runs on; its
// calls meet every fault the Controller injects. nil on a zero Controller.
func (c *Controller) Redis() *redis.Client {
	if c.zero() {
		return nil
	}
	return c.rdb
}

// Miniredis returns the embedded server, which the Controller's faults
// bypass (FastForward, direct reads and writes). nil on a zero Controller.
func (c *Controller) Miniredis() *miniredis.Miniredis {
	if c == nil {
		return nil
	}
	return c.m
}

//go:embed drop.lua
var dropSrc string

//go:embed steal.lua
var stealSrc string

var (
	dropScript  = redis.NewScript(dropSrc)
	stealScript = redis.NewScript(stealSrc)
)

// Expire makes the hold on key end now, as its TTL running out in Redis
// would: the key is gone and no wake-up is sent (waiters notice by their
// backoff). The holder finds out at its next renewal; because its own
// clock says the lease was still valid, the core reports
// [lock.LossVanished] (an early expiry, a delete and a Redis restart look
// alike).
// Expire returns an error wrapping [lock.ErrNotHeld] when nobody holds key.
func (c *Controller) Expire(key string) error {
	return c.drop("expire", key, false)
}

// ForceRelease is an operator's forced release ([lock.Client.ForceRelease]):
// it removes every hold on key, of any kind, and tells the holder's
// process, whose Lost() closes at once with reason
// [lock.LossForceReleased] (at its next renewal if the message is missed);
// waiters wake. It returns an error wrapping [lock.ErrNotHeld] when nobody
// holds key.
func (c *Controller) ForceRelease(key string) error {
	if c.zero() {
		return errZero
	}
	if err := c.ops.ForceRelease(context.Background(), key); err != nil {
		return fmt.Errorf("locktest: force-release %q: %w", key, err)
	}
	return nil
}

func (c *Controller) drop(op, key string, wake bool) error {
	if c.zero() {
		return errZero
	}
	k := c.keys(key)
	flag := "0"
	if wake {
		flag = "1"
	}
	n, err := dropScript.Run(context.Background(), c.admin, k.ReleaseKeys(), flag, lease.MsgReleased).Int()
	switch {
	case err != nil:
		return fmt.Errorf("locktest: %s %q: %w", op, key, err)
	case n == 0:
		return fmt.Errorf("locktest: %s %q: %w", op, key, lock.ErrNotHeld)
	}
	return nil
}

// Steal gives the mutex on key to another token, which keeps the time the
// hold had left, as if another process had taken it over: the holder's
// Lost() closes at its next renewal, reason [lock.LossStolen], and its
// Release returns [lock.ErrNotHeld]. The thief never renews; its hold ends
// by [Controller.Expire], [Controller.ForceRelease] or FastForward.
// Steal returns an error wrapping lock.ErrNotHeld when nobody holds key,
// and one wrapping [lock.ErrInvalid] when key holds another kind of lock.
func (c *Controller) Steal(key string) error {
	if c.zero() {
		return errZero
	}
	k := c.keys(key)
	token := "locktest-thief-" + strconv.FormatInt(c.thief.Add(1), 10)
	n, err := stealScript.Run(context.Background(), c.admin, k.LockKeys(), token, lock.DefaultTTL.Milliseconds()).Int()
	switch {
	case redis.HasErrorPrefix(err, "KIND"):
		kind := strings.TrimPrefix(err.Error(), "KIND ")
		return fmt.Errorf("locktest: steal %q: key %q is a %s, not a mutex: %w", key, key, kind, lock.ErrInvalid)
	case err != nil:
		return fmt.Errorf("locktest: steal %q: %w", key, err)
	case n == 0:
		return fmt.Errorf("locktest: steal %q: %w", key, lock.ErrNotHeld)
	}
	return nil
}

// PauseRenewals holds back, from now until [Controller.ResumeRenewals],
// every call of the client under test that resets a lock's TTL: the
// renewal loop's, and also [lock.Lock.Extend]'s, which blocks until resume
// or the end of its context. Other calls pass, unless the client sends one
// in the same pipeline as such a call. A hold whose renewal
// is held back is declared lost at its safety deadline (about 0.9 TTL after
// its last confirmed renewal), reason [lock.LossUnanswered], while its key
// stays in Redis until its TTL runs out. Pausing twice is pausing once.
func (c *Controller) PauseRenewals() {
	if !c.zero() {
		c.g.pause()
	}
}

// ResumeRenewals lets held-back and later renewals through.
func (c *Controller) ResumeRenewals() {
	if !c.zero() {
		c.g.resume()
	}
}

// Unreachable cuts every connection of the client under test and refuses
// service until [Controller.Restore]: each call fails with a network error
// after go-redis's own retries, wake-ups stop, and a hold is declared lost
// at its safety deadline, reason [lock.LossUnreachable]. The Controller's
// own methods still reach Redis.
func (c *Controller) Unreachable() {
	if !c.zero() {
		c.p.set(true, 0)
	}
}

// Slow delays every reply to the client under test by at least d until
// [Controller.Restore] (or another Slow); d ≤ 0 removes the delay. Slow
// also ends [Controller.Unreachable]: Redis answers again, late. Replies
// already waiting follow the change at once. A renewal whose reply comes
// after its hold's safety deadline loses the hold, reason
// [lock.LossUnanswered].
func (c *Controller) Slow(d time.Duration) {
	if !c.zero() {
		c.p.set(false, max(d, 0))
	}
}

// Restore ends [Controller.Unreachable] and [Controller.Slow]: new
// connections are served at full speed, and delayed replies go out now.
func (c *Controller) Restore() {
	if !c.zero() {
		c.p.set(false, 0)
	}
}
