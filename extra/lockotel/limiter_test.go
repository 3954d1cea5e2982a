package lockotel_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/obstest"
)

// TestObserver_limiter: a rate limiter's calls are counted by outcome,
// with the units they took and the time they lasted.
func TestObserver_limiter(t *testing.T) {
	ctx := context.Background()
	sdk := newSDK(t)
	c := obstest.NewClient(t, obstest.MiniRDB(t), lock.WithObserver(sdk.observer(t)))
	lim := c.NewLimiter(keyFor(t), lock.Rate{N: 10, Per: time.Hour})
	obstest.Must(t, "Wait()", lim.Wait(ctx, 7))
	if ok, _, err := lim.Allow(ctx, 5); ok || err != nil {
		t.Fatalf("Allow(5) past the burst = %v, %v; want false, nil", ok, err)
	}
	ms := sdk.metrics(t)
	outcome := func(v string) attribute.KeyValue { return attribute.String("agentlock.outcome", v) }
	if got := sum(t, ms, "agentlock.limiter.calls", outcome("acquired")); got != 1 {
		t.Errorf("agentlock.limiter.calls{acquired} = %d, want 1", got)
	}
	if got := sum(t, ms, "agentlock.limiter.calls", outcome("contended")); got != 1 {
		t.Errorf("agentlock.limiter.calls{contended} = %d, want 1", got)
	}
	if got := sum(t, ms, "agentlock.limiter.units"); got != 7 {
		t.Errorf("agentlock.limiter.units = %d, want 7", got)
	}
	if got := count(t, ms, "agentlock.limiter.wait"); got != 1 {
		t.Errorf("agentlock.limiter.wait count = %d, want 1", got)
	}
}
