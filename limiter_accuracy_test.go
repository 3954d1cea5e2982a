package lock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentlock/lock"
)

// admission is units a Wait let through, at the time they were due on the
// server's clock (microseconds), counted as the caller used them.
type admission struct {
	due  int64
	used int64
}

// TestLimiter_accuracy: 16 goroutines over two Clients demand several
// times the rate, each Wait of a random n settled with a random count
// (some at once, some after a pause, some given back in full); in every
// window of the run, counted by the server's due times, the units used
// stay within Burst of N·window, and within two Bursts when settles give
// units back.
func TestLimiter_accuracy(t *testing.T) {
	t.Parallel()
	tg := realTarget(t)
	rate := lock.Rate{N: 400, Per: time.Second, Burst: 40}
	key := keyFor(t)
	lims := []*lock.Limiter{newClient(t, tg.rdb).NewLimiter(key, rate), newClient(t, tg.newRDB(t)).NewLimiter(key, rate)}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var (
		mu   sync.Mutex
		got  []admission
		errs = make(chan error, 16)
		wg   sync.WaitGroup
	)
	for g := range 16 {
		lim := lims[g%2]
		wg.Go(func() {
			for ctx.Err() == nil {
				n := 1 + rand.Int64N(rate.Burst)
				rs, err := lock.WaitAll(ctx, lock.Take{L: lim, N: n})
				if err != nil {
					// Units due after the run's deadline are refused at once.
					if !errors.Is(err, lock.ErrNotAcquired) && ctx.Err() == nil {
						errs <- err
					}
					return
				}
				used := rand.Int64N(n + 1)
				if rand.IntN(3) == 0 {
					time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
				}
				if err := rs[0].Settle(context.Background(), used); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				got = append(got, admission{due: lock.ReservationDue(rs[0]), used: used})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Wait() or Settle() error = %v", err)
	}
	worst, total := worstWindow(got, rate)
	t.Logf("%d calls, %d units used; worst window: %d units over the bound", len(got), total, worst)
	// A settle that gives units back moves up reservations already due
	// (docs/design/limiter.md): a window may then hold up to one more Burst.
	if worst > rate.Burst {
		t.Fatalf("a window admitted %d units more than N·window + Burst, more than one Burst", worst)
	}
	if total < rate.N/2 {
		t.Fatalf("%d units in the run: the limiter let too little through to tell", total)
	}
}

// worstWindow returns by how many units the busiest window [a, b] between
// two due times exceeds N·(b-a)/Per + Burst (at most 0 when none does),
// and the units in all.
func worstWindow(got []admission, rate lock.Rate) (worst, total int64) {
	slices.SortFunc(got, func(x, y admission) int { return int(x.due - y.due) })
	worst = -rate.Burst
	for i := range got {
		var sum int64
		for j := i; j < len(got); j++ {
			sum += got[j].used
			allowed := float64(rate.N)*float64(got[j].due-got[i].due)/float64(rate.Per.Microseconds()) + float64(rate.Burst)
			worst = max(worst, sum-int64(allowed))
		}
		total += got[i].used
	}
	return worst, total
}
