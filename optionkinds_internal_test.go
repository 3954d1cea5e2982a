package lock

import (
	"log/slog"
	"testing"
	"time"
)

// TestOptionRules: each row of the option table is its option's bit, in
// order; each With… function sets its own bit and no other; a sample
// value that asks for the option is seen asking; and every row with kinds
// it does not apply to can drop a Client's default.
func TestOptionRules(t *testing.T) {
	t.Parallel()
	samples := map[string]Option{
		"WithTTL":         WithTTL(time.Second),
		"WithWatchdog":    WithWatchdog(false),
		"WithWaitTimeout": WithWaitTimeout(time.Second),
		"WithBackoff":     WithBackoff(time.Millisecond, time.Second),
		"WithNotify":      WithNotify(true),
		"WithReleaseMode": WithReleaseMode(ReleaseWatch),
		"WithPrefix":      WithPrefix("p:"),
		"WithOwner":       WithOwner("o"),
		"WithObserver":    WithObserver(ObserverFunc(func(Event) {})),
		"WithLogger":      WithLogger(slog.New(slog.DiscardHandler)),
		"WithMaxHold":     WithMaxHold(time.Second),
		"WithFencing":     WithFencing(false),
		"WithCoalescing":  WithCoalescing(true),
		"WithReplicaAck":  WithReplicaAck(1, time.Second),
		"WithResultTTL":   WithResultTTL(time.Second),
		"WithErrorTTL":    WithErrorTTL(time.Second),
		"WithFair":        WithFair(true),
		"WithMetadata":    WithMetadata("m"),
		"WithHolderInfo":  WithHolderInfo(true),
		"WithAudit":       WithAudit("audit", 10),
		"WithFallback":    WithFallback(FallbackLocal),
		"WithMaxWaiters":  WithMaxWaiters(1),
	}
	if len(samples) != len(optionRules) {
		t.Errorf("%d samples for %d rows", len(samples), len(optionRules))
	}
	for i := range optionRules {
		r := &optionRules[i]
		if r.id != 1<<i {
			t.Errorf("%s: bit %#x, want %#x", r.name, r.id, 1<<i)
		}
		o := samples[r.name]
		if o == nil {
			t.Errorf("%s: no sample", r.name)
			continue
		}
		cfg := defaultConfig()
		o(&cfg)
		if cfg.given != r.id {
			t.Errorf("%s sets given %#x, want %#x", r.name, cfg.given, r.id)
		}
		if r.notFor == 0 {
			continue
		}
		if r.reset == nil {
			t.Errorf("%s: kinds it does not apply to, and no reset", r.name)
			continue
		}
		if r.asks != nil && !r.asks(&cfg) {
			t.Errorf("%s: the sample does not ask for it", r.name)
		}
		r.reset(&cfg)
		if r.asks != nil && r.asks(&cfg) {
			t.Errorf("%s: asks for it after reset", r.name)
		}
	}
}

// TestConfig_forKind_clientDefaults: a Client's default that a kind does
// not take is dropped for that kind, and kept for the kinds that take it;
// the option given to the lock is refused.
func TestConfig_forKind_clientDefaults(t *testing.T) {
	t.Parallel()
	client := defaultConfig().with([]Option{WithFair(true), WithResultTTL(time.Minute), WithHolderInfo(true)})
	client.given = 0

	sem := client.with(nil)
	if err := sem.forKind(kindPermit); err != nil {
		t.Fatalf("permit forKind() error = %v", err)
	}
	if sem.fair || sem.resultTTL != DefaultResultTTL || !sem.infoOn {
		t.Errorf("permit config fair %v, result TTL %v, info %v; want false, default, true", sem.fair, sem.resultTTL, sem.infoOn)
	}
	mutex := client.with(nil)
	if err := mutex.forMutex(); err != nil || !mutex.fair || mutex.infoOn {
		t.Errorf("mutex forMutex() = %v, fair %v, info %v; want nil, true, false", err, mutex.fair, mutex.infoOn)
	}
	once := client.with(nil)
	if err := once.forKind(kindOnce); err != nil || once.resultTTL != time.Minute || once.fair {
		t.Errorf("once forKind() = %v, result TTL %v, fair %v; want nil, 1m, false", err, once.resultTTL, once.fair)
	}
	given := client.with([]Option{WithFair(true)})
	if err := given.forKind(kindPermit); err == nil {
		t.Error("permit given WithFair(true): forKind() = nil, want an error")
	}
}
