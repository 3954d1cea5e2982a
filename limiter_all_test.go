package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/hooktest"
	"github.com/agentlock/lock/internal/luascripts"
)

// TestLimiter_AllowAll_allOrNothing: when one of two limiters has not got
// the units, AllowAll takes none from the other either; when both have,
// it takes from both.
func TestLimiter_AllowAll_allOrNothing(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, tg *target) {
		ctx := context.Background()
		c := newClient(t, tg.rdb)
		key := keyFor(t)
		rpm := c.NewLimiter(key+"}:rpm", lock.Rate{N: 10, Per: time.Hour})
		tpm := c.NewLimiter(key+"}:tpm", lock.Rate{N: 1000, Per: time.Hour})
		if ok, _, err := lock.AllowAll(ctx, lock.Take{L: rpm, N: 1}, lock.Take{L: tpm, N: 900}); !ok || err != nil {
			t.Fatalf("AllowAll() = %v, %v; want true, nil", ok, err)
		}
		ok, retry, err := lock.AllowAll(ctx, lock.Take{L: rpm, N: 1}, lock.Take{L: tpm, N: 200})
		if ok || err != nil || retry <= 0 {
			t.Fatalf("AllowAll() past tpm = %v, %v, %v; want false, a wait, nil", ok, retry, err)
		}
		wantUnits(t, rpm, 9)
		wantUnits(t, tpm, 100)
	})
}

// TestLimiter_WaitAll_heldReply: a WaitAll whose reserve reply never comes
// back gives up with the units taken from both limiters or neither —
// never from one alone — and a reserve or a settle sent twice (a resend
// after a lost reply) counts once.
func TestLimiter_WaitAll_heldReply(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	rdb := tg.newRDB(t)
	g := hooktest.New(t, hooktest.Config{On: hooktest.Calls, After: true, Nth: 1,
		Match: hooktest.Script(luascripts.LimiterTake.Hash())})
	rdb.AddHook(g)
	c := newClient(t, rdb)
	key := keyFor(t)
	rpm := c.NewLimiter(key+"}:rpm", lock.Rate{N: 10, Per: time.Hour})
	tpm := c.NewLimiter(key+"}:tpm", lock.Rate{N: 1000, Per: time.Hour})
	must(t, "warm-up Allow()", allowErr(rpm.Allow(context.Background(), 1)))
	g.Arm()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := lock.WaitAll(ctx, lock.Take{L: rpm, N: 2}, lock.Take{L: tpm, N: 500}); err == nil {
		t.Fatal("WaitAll() with its reply held = nil error")
	}
	g.Release()
	r, t2 := mustUnits(t, rpm), mustUnits(t, tpm)
	if !(r == 9 && t2 == 1000) && !(r == 7 && t2 == 500) {
		t.Fatalf("after the held reserve: rpm %d, tpm %d units; want both taken (7, 500) or neither (9, 1000)", r, t2)
	}

	twice := tg.newRDB(t)
	twice.AddHook(resend{match: hooktest.Script(luascripts.LimiterTake.Hash(), luascripts.LimiterSettle.Hash())})
	lim := newClient(t, twice).NewLimiter(key+":twice", lock.Rate{N: 10, Per: time.Hour})
	res, err := lim.Reserve(context.Background(), 4)
	must(t, "Reserve() sent twice", err)
	wantUnits(t, lim, 6)
	must(t, "Settle(6) sent twice", res.Settle(context.Background(), 6))
	wantUnits(t, lim, 4)
}

func allowErr(_ bool, _ time.Duration, err error) error { return err }

func mustUnits(t *testing.T, lim *lock.Limiter) int64 {
	t.Helper()
	n, err := lim.Available(context.Background())
	must(t, "Available()", err)
	return n
}

// resend is a go-redis hook that sends each command it matches twice, as
// a client does that resends after losing the first reply.
type resend struct{ match func(redis.Cmder) bool }

func (resend) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r resend) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if r.match(cmd) {
			_ = next(ctx, cmd)
		}
		return next(ctx, cmd)
	}
}

func (resend) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestLimiter_cluster: two limiters whose keys share a hash tag take
// together on a Redis Cluster; two that do not are refused.
func TestLimiter_cluster(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	ctx := context.Background()
	c := newClient(t, cl.Client(t))
	key := keyFor(t)
	rpm := c.NewLimiter(key+"}:rpm", lock.Rate{N: 10, Per: time.Hour})
	tpm := c.NewLimiter(key+"}:tpm", lock.Rate{N: 1000, Per: time.Hour})
	rs, err := lock.WaitAll(ctx, lock.Take{L: rpm, N: 1}, lock.Take{L: tpm, N: 400})
	must(t, "WaitAll()", err)
	must(t, "Settle(100)", rs[1].Settle(ctx, 100))
	wantUnits(t, tpm, 900)
	other := c.NewLimiter("other:"+key, lock.Rate{N: 10, Per: time.Hour})
	_, err = lock.ReserveAll(ctx, lock.Take{L: rpm, N: 1}, lock.Take{L: other, N: 1})
	wantErr(t, "ReserveAll() across slots", err, lock.ErrInvalid)
}
