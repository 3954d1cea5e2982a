package lock

import (
	"log/slog"
	"time"

	"github.com/agentlock/lock/internal/lease"
)

// config is what the options of one lock, or of a Client's defaults, set:
// defaultConfig, then each Option, then validate.
type config struct {
	ttl        time.Duration
	wait       time.Duration
	backoffMin time.Duration
	backoffMax time.Duration
	notify     bool
	watchdog   bool // the bools together: NewLock with options allocates a config
	fencing    bool
	mode       ReleaseMode
	prefix     string
	owner      string
	ownerSet   bool
	observer   Observer
	logger     *slog.Logger
	maxHold    time.Duration
	acks       int           // WithReplicaAck: replicas that must confirm an acquire
	coalesce   bool          // WithCoalescing
	ackTimeout time.Duration // WithReplicaAck: how long WAIT may block
	resultTTL  time.Duration // WithResultTTL: how long Once keeps a result
	errorTTL   time.Duration // WithErrorTTL: how long Once keeps a failure; 0: not at all
	fair       bool          // WithFair: waiters take the key in arrival order
	metadata   string        // WithMetadata
	infoSet    bool          // WithHolderInfo was given
	infoOn     bool          // WithHolderInfo's value
	auditSet   bool          // WithAudit
	audit      string        // WithAudit: "" for none
	auditMax   int64         // WithAudit: the stream's approximate cap
	fallback   Fallback      // WithFallback: what an Acquire does when Redis is unreachable
	maxWaiters int           // WithMaxWaiters: Acquire calls that may wait at once per key; 0: no cap
	// given names the options applied since it was last cleared: a
	// lock's own, which forKind tells from the Client's defaults.
	given optID
}

func defaultConfig() config {
	return config{
		ttl:        DefaultTTL,
		watchdog:   true,
		backoffMin: DefaultBackoffMin,
		backoffMax: DefaultBackoffMax,
		notify:     true,
		prefix:     DefaultPrefix,
		fencing:    true,
		coalesce:   true,
		resultTTL:  DefaultResultTTL,
	}
}

func (cfg config) with(opts []Option) config { return lease.With(cfg, opts) }

// validate reports the first out-of-range value, wrapping ErrInvalid.
func (cfg *config) validate() error {
	if err := lease.CheckOptions(cfg.ttl, cfg.wait, cfg.backoffMin, cfg.backoffMax, cfg.prefix); err != nil {
		return err
	}
	for _, check := range []func() error{cfg.validateHold, cfg.validateOnce, cfg.validateOps, cfg.validateFair} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateHold checks the options of a hold: release mode, owner, cap and
// replica acknowledgements.
func (cfg *config) validateHold() error {
	switch {
	case cfg.mode != ReleaseScript && cfg.mode != ReleaseWatch:
		return invalidf("release mode %d: unknown", int(cfg.mode))
	case cfg.ownerSet && cfg.owner == "":
		return invalidf("owner: must not be empty")
	case cfg.ownerSet && cfg.mode == ReleaseWatch:
		return invalidf("owner %q: re-entrant holds need ReleaseScript", cfg.owner)
	case cfg.maxHold < 0:
		return invalidf("max hold %v: must not be negative", cfg.maxHold)
	case cfg.acks < 0:
		return invalidf("replica acks %d: must not be negative", cfg.acks)
	case cfg.acks > 0 && cfg.ackTimeout < time.Millisecond:
		return invalidf("replica ack timeout %v: must be at least 1ms", cfg.ackTimeout)
	case cfg.acks > 0 && cfg.mode == ReleaseWatch:
		return invalidf("replica acks: need ReleaseScript")
	}
	return nil
}

// validateOnce checks Once's stored-result options.
func (cfg *config) validateOnce() error {
	switch {
	case cfg.resultTTL < time.Millisecond:
		return invalidf("result TTL %v: must be at least 1ms", cfg.resultTTL)
	case cfg.errorTTL != 0 && cfg.errorTTL < time.Millisecond:
		return invalidf("error TTL %v: must be 0 or at least 1ms", cfg.errorTTL)
	}
	return nil
}

// validateOps checks the audit, fallback and max-waiters options.
func (cfg *config) validateOps() error {
	switch {
	case cfg.auditSet && (cfg.audit == "" || cfg.auditMax <= 0):
		return invalidf("audit stream %q, max length %d: need a name and a positive length", cfg.audit, cfg.auditMax)
	case cfg.fallback != FallbackNone && cfg.fallback != FallbackLocal:
		return invalidf("fallback %d: unknown", int(cfg.fallback))
	case cfg.maxWaiters < 0:
		return invalidf("max waiters %d: must not be negative", cfg.maxWaiters)
	}
	return nil
}

// ttlError is the error for a lease shorter than MinTTL, from WithTTL or
// Extend.
func ttlError(ttl time.Duration) error { return lease.TTLError(ttl) }
