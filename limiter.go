package lock

import (
	"context"
	"time"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// Limiter is a rate limit shared by every process on one key: N units per
// Per, bursts up to Burst ([Rate]), kept by GCRA on the Redis server's
// clock, so that hosts whose clocks disagree share one budget. Make one
// with [Client.NewLimiter]; it is safe for concurrent use and holds
// nothing itself. Units are taken now ([Limiter.Allow]), or queued:
// [Limiter.Reserve] and [Limiter.Wait] take them at once and name the
// time they are due, in reservation order, so a large request is not
// starved by small ones. A [Reservation] gives back what it did not use
// ([Reservation.Settle], [Reservation.Cancel]); [AllowAll], [ReserveAll]
// and [WaitAll] take from several limiters at once, all or none. Its keys
// expire once the bucket is full again. See docs/guide.md, "Limiter".
type Limiter struct {
	key  string
	rate Rate
	c    *Client
	cfg  config // valid when err is nil
	keys luascripts.Keys
	err  error
}

// limiterIdle is the least TTL of a limiter's keys: a full bucket's state
// is worth nothing, but a key that expired between two calls of one
// settle would lose its queue.
const limiterIdle = time.Second

// settledKeep is how long a settled reservation's id is remembered, so
// that a settle resent by go-redis, or called again, counts once.
const settledKeep = time.Minute

// NewLimiter returns the limiter of rate on key, configured by the
// Client's options and then opts: prefix, observer ([EventLimit]), notify
// (a waiter hears that units came back) and wait timeout (the longest
// Wait waits). An invalid rate, an empty key, an option a limiter cannot honour
// (any other) or an invalid option is reported, wrapping [ErrInvalid], by
// every verb. Processes sharing a key must use one Rate. NewLimiter talks
// to no server and starts nothing.
func (c *Client) NewLimiter(key string, rate Rate, opts ...Option) *Limiter {
	l := &Limiter{key: key, rate: rate, c: c}
	if c.zero() {
		l.err = keyError(key, errZeroClient)
		return l
	}
	cfg, err := c.kindConfig(kindLimiter, opts)
	if err == nil {
		err = rate.validate()
	}
	if err == nil {
		err = c.checkKey(key)
	}
	if err != nil {
		l.err = keyError(key, err)
		return l
	}
	l.cfg, l.keys = cfg, luascripts.NewKeys(cfg.prefix, key)
	return l
}

// errZeroLimiter is what a zero or nil Limiter reports.
var errZeroLimiter = invalidf("zero Limiter: make limiters with Client.NewLimiter")

// usable returns the error every use of l reports, or nil.
func (l *Limiter) usable() error {
	switch {
	case l == nil || (l.c == nil && l.err == nil):
		return errZeroLimiter
	case l.err != nil:
		return l.err
	}
	return nil
}

// Key returns the caller's key, as given to NewLimiter; "" on a nil Limiter.
func (l *Limiter) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// Rate returns the Limiter's rate, as given to NewLimiter.
func (l *Limiter) Rate() Rate {
	if l == nil {
		return Rate{}
	}
	return l.rate
}

// Allow takes n units if the limiter has them now: (true, 0, nil). When
// it has not, it takes nothing and reports (false, retryAfter, nil), the
// time until it would have them if nobody else took any. Units queued by
// [Limiter.Reserve] and [Limiter.Wait] come first. n < 1 or n > Burst is
// [ErrInvalid], as is an invalid Limiter; a Redis failure is returned as
// it is.
func (l *Limiter) Allow(ctx context.Context, n int64) (ok bool, retryAfter time.Duration, err error) {
	return AllowAll(ctx, Take{L: l, N: n})
}

// Reserve takes n units now and returns their [Reservation], which names,
// in [Reservation.Delay], how long until they are due: 0 when they are
// due now. It fails only for bad input (n < 1 or n > Burst: [ErrInvalid])
// or a Redis failure; it never waits. Give unused units back with
// [Reservation.Cancel] or [Reservation.Settle].
func (l *Limiter) Reserve(ctx context.Context, n int64) (*Reservation, error) {
	rs, err := ReserveAll(ctx, Take{L: l, N: n})
	if err != nil {
		return nil, err
	}
	return rs[0], nil
}

// Wait takes n units, waiting until they are due: one call to Redis to
// reserve them, then a timer; units given back meanwhile wake it sooner.
// When ctx ends first, or when the units would be due after ctx's
// deadline or the wait timeout, it gives them back and returns an error
// matching [ErrNotAcquired] (and the ctx's cause). n < 1 or n > Burst is
// [ErrInvalid].
func (l *Limiter) Wait(ctx context.Context, n int64) error {
	_, err := WaitAll(ctx, Take{L: l, N: n})
	return err
}

// Available returns how many units the limiter could give now, at least 0.
// Units queued by Reserve count as taken. The answer may be stale by the
// time it returns. An invalid Limiter or a key holding another kind of
// lock is [ErrInvalid].
func (l *Limiter) Available(ctx context.Context) (int64, error) {
	st, err := l.state(ctx)
	return st.available, err
}

// limiterState is a limiter as Redis has it now.
type limiterState struct {
	available int64
	tat, now  int64 // server microseconds
	queued    int64 // reservations whose units end after now
}

// state reads l's state.
func (l *Limiter) state(ctx context.Context) (limiterState, error) {
	if err := l.usable(); err != nil {
		return limiterState{}, err
	}
	var st limiterState
	err := l.c.callBounded(ctx, func() error {
		v, err := luascripts.LimiterAvailable.Run(ctx, l.c.rdb, []string{l.keys.Lock(), l.keys.Companion("res")},
			l.rate.args(nil)...).Int64Slice()
		if err == nil && len(v) == 4 {
			st = limiterState{available: v[0], tat: v[1], now: v[2], queued: v[3]}
		}
		return err
	})
	if err != nil {
		return limiterState{}, lease.NewOpError("lock", "available", l.key, mixedKind(l.key, err, "rate limiter"))
	}
	return st, nil
}
