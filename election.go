package lock

import (
	"context"
	"sync/atomic"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// Election elects one leader per name across every process: a candidate's
// [Election.Campaign] returns once it leads, and it leads for one term, a
// lease renewed, lost and fenced like a lock's hold, until it resigns or
// the term is lost. Terms are fencing tokens: each is greater than every
// term of the election before it, also across the expiry of its counter
// and a Redis restart without persistence. Everyone can read the leader
// ([Election.Leader]) and follow it ([Election.Observe]), which Redis
// pushes through the Client's wake-up subscription. Make one with
// [Client.NewElection]; one Election is one candidate, safe for concurrent
// use, leading at most once at a time. docs/guide.md ("Election") and
// docs/design/election.md describe its keys and its guarantees.
type Election struct {
	name string
	set  *settings // nil when err is set
	err  error
	l    *Lock                  // the candidate's terms, one hold each
	val  atomic.Pointer[string] // the value the next campaign writes
}

// NewElection returns a candidate in the election called name, configured
// by the Client's options and then opts (TTL, watchdog, wait timeout,
// backoff, notify, prefix, observer, logger, max hold, audit, max
// waiters). An empty name, an option an election cannot honour
// ([ReleaseWatch], [WithOwner], [WithReplicaAck], [WithFair],
// [WithFencing](false), [WithMetadata], [WithHolderInfo],
// [WithFallback], Once's options) or an invalid option is reported,
// wrapping [ErrInvalid], by every verb. It talks to no server and starts
// nothing.
func (c *Client) NewElection(name string, opts ...Option) *Election {
	e := &Election{name: name, l: &Lock{}}
	if c.zero() {
		e.fail(keyError(name, errZeroClient))
		return e
	}
	cfg, err := c.kindConfig(kindElection, opts)
	if err == nil {
		err = c.checkKey(name)
	}
	if err != nil {
		e.fail(keyError(name, err))
		return e
	}
	set := c.settings(cfg)
	set.be = electBackend{rdb: c.rdb, pub: &c.pub, val: &e.val}
	set.grp = renewGroup{be: electBackend{rdb: c.rdb, pub: &c.pub}, rdb: c.rdb}
	set.pol.Strategy = lease.Contend // a resign publishes: the waiting candidates try at once
	set.pol.Tag = electTag{}         // so a mutex's release hands it nothing (handoff)
	e.set = set
	e.l.initMutex(set, luascripts.NewKeys(cfg.prefix, name))
	return e
}

// electTag marks the policies of elections (lease.Policy.Tag).
type electTag struct{}

// fail makes e an election every verb of which returns err.
func (e *Election) fail(err error) {
	e.err = err
	e.l.hd.Fail(e.name, err)
}

// errZeroElection is what a zero or nil Election reports.
var errZeroElection = invalidf("zero Election: make elections with Client.NewElection")

// usable returns the error every verb of e reports, or nil.
func (e *Election) usable() error {
	switch {
	case e == nil || (e.set == nil && e.err == nil):
		return errZeroElection
	case e.err != nil:
		return e.err
	}
	return nil
}

// Name returns the election's name, as given to NewElection.
func (e *Election) Name() string {
	if e == nil {
		return ""
	}
	return e.name
}

// opErr returns the error of verb op on the election.
func (e *Election) opErr(op string, errs ...error) error {
	return lease.NewOpError("lock", op, e.name, errs...)
}

// Campaign waits until this candidate leads the election, with value as
// the leader's value, as [Lock.Acquire] waits for a lock: a resign wakes
// the waiting candidates at once, a crashed leader's term runs out by its
// TTL. It returns nil once leading; an error wrapping [ErrNotAcquired]
// when the wait ended (ctx done: matching context.Cause(ctx) too, or
// [WithWaitTimeout]); [ErrInvalid] for an empty value, an invalid
// Election or one leading already; [ErrClosed] after [Client.Close]; or
// the Redis error that a retry cannot mend.
func (e *Election) Campaign(ctx context.Context, value string) error {
	if err := e.usable(); err != nil {
		return err
	}
	if value == "" {
		return e.opErr("campaign", invalidf("empty value"))
	}
	e.val.Store(&value)
	return e.l.Acquire(ctx)
}

// Proclaim sets the leader's value to value, in the same term, while this
// candidate leads; observers see the change. It returns an error wrapping
// [ErrNotHeld] when this candidate does not lead (never did, resigned, or
// its term was lost: then reported lost, as a renewal would), [ErrInvalid]
// for an empty value or an invalid Election, or the Redis error.
func (e *Election) Proclaim(ctx context.Context, value string) error {
	if err := e.usable(); err != nil {
		return err
	}
	if value == "" {
		return e.opErr("proclaim", invalidf("empty value"))
	}
	h := e.l.hd.Hold()
	if h == nil {
		return e.opErr("proclaim", ErrNotHeld)
	}
	if err := e.l.hd.NotHeld("proclaim", h); err != nil {
		return err
	}
	var st extendStatus
	err := e.set.c.callBounded(ctx, func() (err error) {
		st, err = e.set.be.(electBackend).proclaim(ctx, &e.l.hd.Keys, h.Token(), value)
		return err
	})
	switch {
	case err != nil:
		return e.opErr("proclaim", err)
	case st == extendGone:
		e.l.hd.Lose(h, lease.Gone)
		return e.opErr("proclaim", ErrNotHeld)
	case st == extendStolen:
		e.l.hd.Lose(h, lease.Stolen)
		return e.opErr("proclaim", ErrNotHeld)
	}
	e.val.Store(&value)
	return nil
}

// Resign ends this candidate's term at once, as [Lock.Release] ends a
// hold: the term leaves renewal, its key is deleted, and the message that
// says so wakes a waiting candidate in each process, which takes over in
// about one round trip, and every observer. [Election.Lost] stays open. It
// returns nil when our term ended; an error wrapping [ErrNotHeld] when
// this candidate did not lead (never did, resigned already, or its term
// was lost); [ErrInvalid] for an invalid Election; or the Redis error,
// after which the term, no longer renewed, runs out by its TTL if the
// resign did not land. It works after [Client.Close].
func (e *Election) Resign(ctx context.Context) error {
	if err := e.usable(); err != nil {
		return err
	}
	return e.l.Release(ctx)
}

// Leader returns the election's leader now, asking Redis: its value, term
// and since. It returns an error wrapping [ErrNoLeader] when nobody
// leads, [ErrInvalid] for an invalid Election or a name that holds
// another kind of lock, or the Redis error. It needs no campaign.
func (e *Election) Leader(ctx context.Context) (Leadership, error) {
	if err := e.usable(); err != nil {
		return Leadership{}, err
	}
	var l Leadership
	err := e.set.c.callBounded(ctx, func() (err error) {
		l, _, err = readLeader(ctx, e.set.c.rdb, &e.l.hd.Keys)
		return err
	})
	if err != nil {
		return Leadership{}, e.opErr("leader", err)
	}
	return l, nil
}

// Term returns this candidate's current or last term: a fencing token to
// pass to what the leader writes, so a store can refuse a deposed
// leader's late writes. 0 before the first term.
func (e *Election) Term() int64 {
	if e == nil {
		return 0
	}
	return e.l.Fence()
}

// Lost returns a channel closed when the current term ends involuntarily:
// taken over, expired, deleted, or not confirmed by renewal before its
// safety deadline. A Resign does not close it. Each term has its own
// channel; before the first term Lost returns nil (a channel that never
// closes). See [Election.LostErr] for the reason.
func (e *Election) Lost() <-chan struct{} {
	if e == nil {
		return nil
	}
	return e.l.Lost()
}

// LostErr returns the [*LostError] of the current term once
// [Election.Lost] has closed, and nil before. It matches [ErrLockLost].
func (e *Election) LostErr() error {
	if e == nil {
		return nil
	}
	return e.l.LostErr()
}

// Lead campaigns with value, runs fn while this candidate leads and
// resigns when fn returns, also when fn panics (the panic then goes on).
// fn's context ends, cause a [*LostError], if the term is lost while fn
// runs, and the error Lead returns then matches [ErrLockLost] whatever fn
// returned. Otherwise Lead returns Campaign's error, or fn's. A nil fn or
// an empty value is [ErrInvalid].
func (e *Election) Lead(ctx context.Context, value string, fn func(context.Context) error) error {
	if err := e.usable(); err != nil {
		return err
	}
	switch {
	case fn == nil:
		return e.opErr("lead", invalidf("nil fn"))
	case value == "":
		return e.opErr("lead", invalidf("empty value"))
	}
	e.val.Store(&value)
	return lease.WithLock(ctx, "lock", &e.l.hd, e.l.kind(), fn)
}
