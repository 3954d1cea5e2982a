package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentlock/lock"
)

// slowRate lets 10 units through per hour, 5 at once: nothing comes back
// by itself while a test runs, so counts are exact.
var slowRate = lock.Rate{N: 10, Per: time.Hour, Burst: 5}

// TestLimiter_Allow_burstThenRefused: an idle limiter gives its burst,
// then refuses with the time one more unit takes.
func TestLimiter_Allow_burstThenRefused(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		lim := newClient(t, tg.rdb).NewLimiter(keyFor(t), slowRate)
		for i := range 5 {
			if ok, _, err := lim.Allow(ctx, 1); !ok || err != nil {
				t.Fatalf("Allow() #%d = %v, %v; want true, nil", i, ok, err)
			}
		}
		ok, retry, err := lim.Allow(ctx, 1)
		if ok || err != nil || retry <= 5*time.Minute || retry > 6*time.Minute {
			t.Fatalf("Allow() past the burst = %v, %v, %v; want false, about 6m, nil", ok, retry, err)
		}
		if n, err := lim.Available(ctx); n != 0 || err != nil {
			t.Fatalf("Available() = %d, %v; want 0, nil", n, err)
		}
	})
}

// TestLimiter_badInput: n outside [1, Burst], a bad Rate and a bad option
// are ErrInvalid at once, for every verb.
func TestLimiter_badInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newClient(t, miniTarget(t).rdb)
	lim := c.NewLimiter(keyFor(t), slowRate)
	for _, n := range []int64{0, -1, 6} {
		_, _, err := lim.Allow(ctx, n)
		wantErr(t, "Allow()", err, lock.ErrInvalid)
		_, err = lim.Reserve(ctx, n)
		wantErr(t, "Reserve()", err, lock.ErrInvalid)
		wantErr(t, "Wait()", lim.Wait(ctx, n), lock.ErrInvalid)
	}
	for _, r := range []lock.Rate{{N: 0, Per: time.Second}, {N: 1, Per: 0}, {N: 1, Per: time.Second, Burst: -1}} {
		_, err := c.NewLimiter(keyFor(t), r).Available(ctx)
		wantErr(t, "Available() of a bad rate", err, lock.ErrInvalid)
	}
	_, err := c.NewLimiter("", slowRate).Available(ctx)
	wantErr(t, "Available() of an empty key", err, lock.ErrInvalid)
	_, err = c.NewLimiter(keyFor(t), slowRate, lock.WithTTL(time.Minute)).Available(ctx)
	wantErr(t, "Available() WithTTL", err, lock.ErrInvalid)
	r, err := lim.Reserve(ctx, 1)
	must(t, "Reserve()", err)
	wantErr(t, "Settle(-1)", r.Settle(ctx, -1), lock.ErrInvalid)
	_, err = (*lock.Limiter)(nil).Available(ctx)
	wantErr(t, "nil Available()", err, lock.ErrInvalid)
	wantErr(t, "nil Settle()", (*lock.Reservation)(nil).Settle(ctx, 1), lock.ErrInvalid)
	_, err = lock.ReserveAll(ctx, lock.Take{L: lim, N: 1}, lock.Take{L: lim, N: 1})
	wantErr(t, "ReserveAll() of one limiter twice", err, lock.ErrInvalid)
	_, err = lock.ReserveAll(ctx)
	wantErr(t, "ReserveAll() of nothing", err, lock.ErrInvalid)
	must(t, "Close()", c.Close())
	wantErr(t, "Wait() after Close", lim.Wait(ctx, 1), lock.ErrClosed)
	must(t, "Settle() after Close", r.Settle(ctx, 0))
}

// TestLimiter_Reserve_fifo: reservations past the burst queue in order,
// each due one unit's time after the one before, and a large one is due
// before the small ones reserved after it.
func TestLimiter_Reserve_fifo(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		lim := newClient(t, tg.rdb).NewLimiter(keyFor(t), slowRate)
		var last time.Duration
		for i, n := range []int64{5, 1, 5, 1, 1} {
			r, err := lim.Reserve(ctx, n)
			must(t, "Reserve()", err)
			if i == 0 && r.Delay() != 0 {
				t.Fatalf("first Reserve(5).Delay() = %v, want 0", r.Delay())
			}
			if i > 0 && r.Delay() <= last {
				t.Fatalf("Reserve(%d) #%d Delay() = %v, want after the one before (%v)", n, i, r.Delay(), last)
			}
			last = r.Delay()
		}
		// 5 + 1 + 5 + 1 + 1 units, 5 of them at once: 8 more at 6m each.
		if want := 8 * 6 * time.Minute; last < want-time.Second || last > want {
			t.Fatalf("last Delay() = %v, want about %v", last, want)
		}
		if ok, _, err := lim.Allow(ctx, 1); ok || err != nil {
			t.Fatalf("Allow() behind the queue = %v, %v; want false, nil", ok, err)
		}
	})
}

// TestLimiter_Settle_refundAndTakeMore: a settle below the reservation
// gives units back, above it takes more; both count once.
func TestLimiter_Settle_refundAndTakeMore(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		lim := newClient(t, tg.rdb).NewLimiter(keyFor(t), slowRate)
		r, err := lim.Reserve(ctx, 4)
		must(t, "Reserve()", err)
		wantUnits(t, lim, 1)
		must(t, "Settle(1)", r.Settle(ctx, 1))
		wantUnits(t, lim, 4)
		must(t, "Settle(1) again", r.Settle(ctx, 1))
		must(t, "Cancel() after Settle", r.Cancel(ctx))
		wantUnits(t, lim, 4)

		more, err := lim.Reserve(ctx, 1)
		must(t, "Reserve()", err)
		must(t, "Settle(3)", more.Settle(ctx, 3))
		wantUnits(t, lim, 1)
		must(t, "Settle(3) again", more.Settle(ctx, 3))
		wantUnits(t, lim, 1)
	})
}

// TestLimiter_Cancel_twiceReturnsOnce: a cancelled reservation gives its
// units back once; a second Cancel changes nothing.
func TestLimiter_Cancel_twiceReturnsOnce(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		lim := newClient(t, tg.rdb).NewLimiter(keyFor(t), slowRate)
		r, err := lim.Reserve(ctx, 5)
		must(t, "Reserve()", err)
		q, err := lim.Reserve(ctx, 2)
		must(t, "Reserve()", err)
		must(t, "Cancel()", r.Cancel(ctx))
		must(t, "Cancel() again", r.Cancel(ctx))
		wantUnits(t, lim, 3) // q's 2 moved up into r's place
		must(t, "Cancel()", q.Cancel(ctx))
		wantUnits(t, lim, 5)
	})
}

func wantUnits(t *testing.T, lim *lock.Limiter, want int64) {
	t.Helper()
	if n, err := lim.Available(context.Background()); n != want || err != nil {
		t.Fatalf("Available() = %d, %v; want %d, nil", n, err, want)
	}
}

// TestLimiter_Wait_ctxEnds: a Wait whose units are due after ctx's
// deadline gives up at once and gives them back.
func TestLimiter_Wait_ctxEnds(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		lim := newClient(t, tg.rdb).NewLimiter(keyFor(t), slowRate)
		must(t, "Wait()", lim.Wait(context.Background(), 5))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := lim.Wait(ctx, 1)
		wantErr(t, "Wait() past the deadline", err, lock.ErrNotAcquired)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait() error = %v, want it to match context.DeadlineExceeded", err)
		}
		r, err := lim.Reserve(context.Background(), 1)
		must(t, "Reserve()", err)
		if d := r.Delay(); d > 6*time.Minute {
			t.Fatalf("Reserve().Delay() = %v: the given-up Wait kept its place", d)
		}
	})
}

// TestLimiter_serverClock: a limiter reads only the server's clock, so one
// a year behind the host's keeps the rate as well: the queue's delays are
// the rate's, neither a year long nor none.
func TestLimiter_serverClock(t *testing.T) {
	t.Parallel()
	tg := miniTarget(t)
	ctx := context.Background()
	lim := newClient(t, tg.rdb).NewLimiter(keyFor(t), slowRate)
	for _, skew := range []time.Duration{-365 * 24 * time.Hour, 365 * 24 * time.Hour} {
		tg.mr.SetTime(time.Now().Add(skew))
		r, err := lim.Reserve(ctx, 5)
		must(t, "Reserve(5)", err)
		next, err := lim.Reserve(ctx, 1)
		must(t, "Reserve(1)", err)
		if d := next.Delay() - r.Delay(); d < 5*time.Minute || d > 6*time.Minute+time.Second {
			t.Fatalf("server clock %v off: Delay() %v after %v; want 6m apart at most", skew, next.Delay(), r.Delay())
		}
		must(t, "Cancel()", next.Cancel(ctx))
		must(t, "Cancel()", r.Cancel(ctx))
		tg.mr.FlushAll()
	}
}

// TestLimiter_Reserve_largeNotStarved: a reservation of a whole burst,
// made between streams of small ones, is due before every small one made
// after it.
func TestLimiter_Reserve_largeNotStarved(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	ctx := context.Background()
	lim := newClient(t, tg.rdb).NewLimiter(keyFor(t), lock.Rate{N: 100, Per: time.Hour, Burst: 50})
	for range 60 {
		_, err := lim.Reserve(ctx, 1)
		must(t, "Reserve(1)", err)
	}
	large, err := lim.Reserve(ctx, 50)
	must(t, "Reserve(50)", err)
	for i := range 60 {
		small, err := lim.Reserve(ctx, 1)
		must(t, "Reserve(1)", err)
		if small.Delay() <= large.Delay() {
			t.Fatalf("small reservation #%d after the large one: Delay() %v, the large one's %v", i, small.Delay(), large.Delay())
		}
	}
}

// TestLimiter_inspect: Inspect shows a limiter's key as kind "limiter"
// with no holders, ForceRelease finds nothing to force, and a mutex on
// the key is refused, naming the limiter.
func TestLimiter_inspect(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		key := keyFor(t)
		must(t, "Wait()", c.NewLimiter(key, slowRate).Wait(ctx, 2))
		info, err := c.Inspect(ctx, key)
		if err != nil || info.Kind != "limiter" || len(info.Holders) != 0 {
			t.Fatalf("Inspect() = %+v, %v; want kind limiter, no holders", info, err)
		}
		wantErr(t, "ForceRelease()", c.ForceRelease(ctx, key), lock.ErrNotHeld)
		_, err = c.NewLock(key).TryAcquire(ctx)
		wantErr(t, "TryAcquire() on a limiter's key", err, lock.ErrInvalid)
		_, err = c.NewLimiter(key, slowRate).Available(ctx)
		must(t, "Available() after", err)
	})
}

// TestLimiter_Settle_passedTimeStaysSpent: a settle gives back only the
// part of its reservation still ahead of the server's clock; the part
// whose time has passed was the rate's to spend, and the reservation
// behind it moves up by what came back, no more.
func TestLimiter_Settle_passedTimeStaysSpent(t *testing.T) {
	t.Parallel()
	tg := miniTarget(t)
	ctx := context.Background()
	t0 := time.Now()
	tg.mr.SetTime(t0)
	lim := newClient(t, tg.rdb).NewLimiter(keyFor(t), slowRate) // a unit per 6m, 5 at once
	r, err := lim.Reserve(ctx, 5)                               // its units run to t0+30m
	must(t, "Reserve(5)", err)
	q, err := lim.Reserve(ctx, 1) // due at t0+6m
	must(t, "Reserve(1)", err)
	tg.mr.SetTime(t0.Add(12 * time.Minute))
	must(t, "Cancel()", r.Cancel(ctx)) // 18m of r's 30m are still ahead: 3 units
	// q moved up 18m, to end at t0+18m: of the 5-unit bucket, 1 is q's.
	wantUnits(t, lim, 4)
	must(t, "Cancel()", q.Cancel(ctx))
	wantUnits(t, lim, 5)
}

// TestLimiter_keysExpire: every key a limiter writes has a TTL, the state's
// as long as the bucket takes to fill again (and a second).
func TestLimiter_keysExpire(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		key := keyFor(t)
		lim := newClient(t, tg.rdb).NewLimiter(key, slowRate) // 5 units refill in 30m
		_, err := lim.Reserve(ctx, 5)
		must(t, "Reserve()", err)
		q, err := lim.Reserve(ctx, 1)
		must(t, "Reserve()", err)
		must(t, "Settle()", q.Settle(ctx, 1))
		for _, k := range []string{lockKey(key), lockKey(key) + ":res", lockKey(key) + ":done"} {
			if d := tg.rdb.PTTL(ctx, k).Val(); d <= 0 {
				t.Fatalf("PTTL(%s) = %v, want a TTL", k, d)
			}
		}
		if d := tg.rdb.PTTL(ctx, lockKey(key)).Val(); d < 35*time.Minute || d > 36*time.Minute+time.Second {
			t.Fatalf("PTTL(state) = %v, want about 36m: the 6 units reserved, refilled", d)
		}
	})
}
