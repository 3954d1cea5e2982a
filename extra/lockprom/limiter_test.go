package lockprom_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/extra/lockprom"
	"github.com/agentlock/lock/internal/obstest"
)

// TestCollector_limiter: a rate limiter's calls are counted by outcome,
// with the units they took and the time they lasted.
func TestCollector_limiter(t *testing.T) {
	eachRedis(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		col := lockprom.NewCollector()
		c := obstest.NewClient(t, rdb, lock.WithObserver(col))
		lim := c.NewLimiter(strings.ReplaceAll(t.Name(), "/", ":"), lock.Rate{N: 10, Per: time.Hour})
		obstest.Must(t, "Wait()", lim.Wait(ctx, 7))
		if ok, _, err := lim.Allow(ctx, 2); !ok || err != nil {
			t.Fatalf("Allow(2) = %v, %v; want true, nil", ok, err)
		}
		if ok, _, err := lim.Allow(ctx, 2); ok || err != nil {
			t.Fatalf("Allow(2) past the burst = %v, %v; want false, nil", ok, err)
		}
		text := exposition(t, col)
		for name, want := range map[string]float64{
			`agentlock_limiter_calls_total{outcome="acquired"}`:  2,
			`agentlock_limiter_calls_total{outcome="contended"}`: 1,
			`agentlock_limiter_units_total`:                      9,
		} {
			if got := text[name]; got != want {
				t.Errorf("%s = %v, want %v", name, got, want)
			}
		}
		if got := sampleCount(t, col, "agentlock_limiter_wait_seconds", nil); got != 2 {
			t.Errorf("agentlock_limiter_wait_seconds count = %d, want 2", got)
		}
	})
}
