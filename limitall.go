package lock

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/lease"
	"github.com/agentlock/lock/internal/luascripts"
)

// Take is N units of the limiter L, for [AllowAll], [ReserveAll] and
// [WaitAll], which take from several limiters in one script: a request
// and its tokens, against the requests-per-minute and the
// tokens-per-minute limiters of one API key.
type Take struct {
	L *Limiter // the limiter to take from
	N int64    // the units, in [1, L's Burst]
}

// AllowAll is [Limiter.Allow] for several limiters at once: it takes every
// Take's units, or, when some limiter has not got them now, none, and
// reports the time until all would have them. The limiters must come from
// one Client and have distinct keys; on Redis Cluster (or a Ring) their
// keys must share a hash tag, as "acct}:rpm" and "acct}:tpm" do (tag
// "acct"): other sets are [ErrInvalid], as is any Take's N < 1 or
// N > Burst. After [Client.Close] it returns [ErrClosed], as do the other
// calls that take units; Settle and Cancel still give units back.
func AllowAll(ctx context.Context, takes ...Take) (ok bool, retryAfter time.Duration, err error) {
	c, err := checkTakes("allow", takes)
	if err != nil {
		return false, 0, err
	}
	start := time.Now()
	ok, wait, _, err := c.take(ctx, "allow", takes, nil)
	switch {
	case err != nil:
		observeTakes(ctx, takes, start, err)
	case !ok:
		observeTakes(ctx, takes, start, ErrNotAcquired)
		return false, wait, nil
	default:
		observeTakes(ctx, takes, start, nil)
	}
	return ok, 0, err
}

// ReserveAll is [Limiter.Reserve] for several limiters at once, with
// [AllowAll]'s rules: one Reservation per Take, in order, all taken in one
// script. Each Reservation's Delay is the time until the last of them is
// due, and each is settled on its own.
func ReserveAll(ctx context.Context, takes ...Take) ([]*Reservation, error) {
	start := time.Now()
	rs, err := reserveAll(ctx, takes)
	observeTakes(ctx, takes, start, err)
	return rs, err
}

// WaitAll is [Limiter.Wait] for several limiters at once, with
// [AllowAll]'s rules: it reserves every Take's units in one script and
// waits until the last of them is due, returning their Reservations, in
// order, so that each can be settled. When the wait ends first it gives
// every unit back and returns an error matching [ErrNotAcquired].
func WaitAll(ctx context.Context, takes ...Take) ([]*Reservation, error) {
	start := time.Now()
	rs, err := reserveAll(ctx, takes)
	if err == nil {
		if err = waitDue(ctx, rs); err != nil {
			err = errors.Join(err, cancelAll(ctx, rs))
			rs = nil
		}
	}
	observeTakes(ctx, takes, start, err)
	return rs, err
}

// reserveAll is ReserveAll without its events.
func reserveAll(ctx context.Context, takes []Take) ([]*Reservation, error) {
	c, err := checkTakes("reserve", takes)
	if err != nil {
		return nil, err
	}
	rs := make([]*Reservation, len(takes))
	ids := make([]string, len(takes))
	for i, t := range takes {
		ids[i] = strconv.FormatUint(rand.Uint64(), 36) + strconv.FormatUint(rand.Uint64(), 36)
		rs[i] = &Reservation{l: t.L, id: ids[i], n: t.N}
	}
	_, wait, now, err := c.take(ctx, "reserve", takes, ids)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		r.delay, r.due = wait, now+wait.Microseconds()
	}
	return rs, nil
}

// observeTakes tells the Observer of each take's limiter of a call that
// began at start and ended with err: EventLimit.
func observeTakes(ctx context.Context, takes []Take, start time.Time, err error) {
	var d time.Duration
	for _, t := range takes {
		if t.L == nil || t.L.cfg.observer == nil {
			continue
		}
		if d == 0 {
			d = time.Since(start)
		}
		e := Event{Kind: EventLimit, Key: t.L.key, Duration: d, Err: err, Ctx: ctx}
		if err == nil {
			e.Units = t.N
		}
		t.L.cfg.observer.Observe(e)
	}
}

// checkTakes returns the Client of takes, or the error, wrapping
// ErrInvalid, of a set of takes no script can run.
func checkTakes(op string, takes []Take) (*Client, error) {
	if len(takes) == 0 {
		return nil, lease.NewOpError("lock", op, "", invalidf("no limiter to take from"))
	}
	c := takes[0].L.client()
	for i, t := range takes {
		if err := t.L.usable(); err != nil {
			return nil, err
		}
		var err error
		switch b := t.L.rate.burst(); {
		case t.N < 1 || t.N > b:
			err = invalidf("%d units: n must be in [1, %d] (the burst)", t.N, b)
		case t.L.c != c:
			err = invalidf("limiters of different Clients")
		case c.eng.Closed():
			err = ErrClosed // settles still run: they only give back
		}
		for _, u := range takes[:i] {
			if err == nil {
				err = sameScript(c, u.L, t.L)
			}
		}
		if err != nil {
			return nil, lease.NewOpError("lock", op, t.L.key, err)
		}
	}
	return c, nil
}

// sameScript returns the error of two limiters one script cannot take
// from together: the same key twice, or keys apart on a Cluster or Ring.
func sameScript(c *Client, a, b *Limiter) error {
	ka, kb := a.keys.Lock(), b.keys.Lock()
	switch {
	case ka == kb:
		return invalidf("limiter %q given twice", b.key)
	case c.cluster && luascripts.KeySlot(ka) == luascripts.KeySlot(kb):
		return nil
	}
	if _, plain := c.rdb.(*redis.Client); plain || hashTag(ka) == hashTag(kb) {
		return nil
	}
	return invalidf("limiters %q and %q: their keys must share a hash tag here", a.key, b.key)
}

// hashTag returns the hash tag of a Redis key, as Redis Cluster reads it.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// client returns l's Client; nil for a nil Limiter.
func (l *Limiter) client() *Client {
	if l == nil {
		return nil
	}
	return l.c
}

// take runs limiter_take.lua over takes: ids nil to allow, one per take
// to reserve. It returns whether the units were taken, the wait its reply
// names, and the server's clock (us).
func (c *Client) take(ctx context.Context, mode string, takes []Take, ids []string) (ok bool, wait time.Duration, now int64, err error) {
	keys := make([]string, 0, 2*len(takes))
	args := make([]any, 0, 2+5*len(takes))
	args = append(args, mode, limiterIdle.Milliseconds())
	for i, t := range takes {
		keys = append(keys, t.L.keys.Lock(), t.L.keys.Companion("res"))
		args = append(t.L.rate.args(args), t.N, "")
		if ids != nil {
			args[len(args)-1] = ids[i]
		}
	}
	var v []int64
	err = c.callBounded(ctx, func() (err error) {
		v, err = luascripts.LimiterTake.Run(ctx, c.rdb, keys, args...).Int64Slice()
		return err
	})
	if err == nil && len(v) != 3 {
		err = errors.New("limiter script: unexpected reply")
	}
	if err != nil {
		first := takes[0].L.key
		return false, 0, 0, lease.NewOpError("lock", mode, first, mixedKind(first, err, "rate limiter"))
	}
	return v[0] == 1, time.Duration(v[1]) * time.Microsecond, v[2], nil
}
