package redlock

import (
	"log/slog"
	"time"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/lease"
)

// Defaults, documented on the options that change them.
const (
	DefaultTTL         = lock.DefaultTTL
	DefaultBackoffMin  = lock.DefaultBackoffMin
	DefaultBackoffMax  = lock.DefaultBackoffMax
	DefaultPrefix      = lock.DefaultPrefix
	DefaultDriftFactor = 0.01
	DefaultNodeTimeout = 100 * time.Millisecond
	// MinTTL is the shortest lease WithTTL and Extend accept, as in the
	// core ([lock.MinTTL], which says how it was chosen).
	MinTTL = lock.MinTTL
)

// Option configures a [Client] (as the default for its locks) or one lock
// ([Client.NewLock], [Client.WithLock]). Invalid values are reported as an
// error wrapping [lock.ErrInvalid] by the first call that uses them.
type Option func(*config)

type config struct {
	ttl         time.Duration
	watchdog    bool
	wait        time.Duration
	backoffMin  time.Duration
	backoffMax  time.Duration
	notify      bool
	prefix      string
	observer    lock.Observer
	logger      *slog.Logger
	fencing     bool
	quorum      int
	driftFactor float64
	nodeTimeout time.Duration
}

func defaultConfig() config {
	return config{
		ttl:         DefaultTTL,
		watchdog:    true,
		backoffMin:  DefaultBackoffMin,
		backoffMax:  DefaultBackoffMax,
		notify:      true,
		prefix:      DefaultPrefix,
		fencing:     true,
		driftFactor: DefaultDriftFactor,
		nodeTimeout: DefaultNodeTimeout,
	}
}

func (cfg config) with(opts []Option) config { return lease.With(cfg, opts) }

// validate reports the first out-of-range value for n nodes, wrapping
// ErrInvalid.
func (cfg *config) validate(n int) error {
	if err := lease.CheckOptions(cfg.ttl, cfg.wait, cfg.backoffMin, cfg.backoffMax, cfg.prefix); err != nil {
		return err
	}
	switch {
	case cfg.quorum != 0 && (cfg.quorum < n/2+1 || cfg.quorum > n):
		return invalidf("quorum %d: must be between %d and %d for %d nodes", cfg.quorum, n/2+1, n, n)
	case !(cfg.driftFactor >= 0 && cfg.driftFactor < 0.5):
		return invalidf("drift factor %v: must be in [0, 0.5)", cfg.driftFactor)
	case cfg.nodeTimeout <= 0:
		return invalidf("node timeout %v: must be positive", cfg.nodeTimeout)
	case cfg.ttl-drift(cfg.ttl, cfg.driftFactor)-2*effectiveNodeTimeout(cfg) <= 0:
		return invalidf("ttl %v: leaves no validity after drift and node timeouts", cfg.ttl)
	}
	return nil
}

// quorumOf returns the configured quorum, or n/2+1.
func (cfg *config) quorumOf(n int) int {
	if cfg.quorum != 0 {
		return cfg.quorum
	}
	return n/2 + 1
}

// drift is the clock-drift allowance of a hold: ttl·factor + 2ms.
func drift(ttl time.Duration, factor float64) time.Duration {
	return time.Duration(float64(ttl)*factor) + 2*time.Millisecond
}

// effectiveNodeTimeout bounds every per-node call: the configured timeout,
// but never more than a tenth of the TTL, so that slow nodes cannot eat the
// validity of a hold.
func effectiveNodeTimeout(cfg *config) time.Duration {
	return nodeTimeoutFor(cfg.nodeTimeout, cfg.ttl)
}

// nodeTimeoutFor is the node timeout used with ttl: nodeTimeout, at most
// ttl/10, at least 1ms.
func nodeTimeoutFor(nodeTimeout, ttl time.Duration) time.Duration {
	return max(min(nodeTimeout, ttl/10), time.Millisecond)
}

// WithTTL sets the lease length on every node. Default 30s; at least
// [MinTTL] (100ms), counted in whole milliseconds, and long enough to leave
// validity after the drift allowance and two node timeouts. See
// [lock.WithTTL].
func WithTTL(ttl time.Duration) Option { return func(c *config) { c.ttl = ttl } }

// WithWatchdog turns renewal on (the default) or off. On, the Client renews
// every held lock on all nodes at TTL/3, and [Lock.Lost] closes when a quorum
// cannot be confirmed before the hold's validity runs out. Off, the hold
// lapses at the end of its validity unless extended, and Lost closes then.
func WithWatchdog(on bool) Option { return func(c *config) { c.watchdog = on } }

// WithWaitTimeout bounds how long [Lock.Acquire] waits. Default 0: wait until
// ctx is done. Negative is invalid.
func WithWaitTimeout(d time.Duration) Option { return func(c *config) { c.wait = d } }

// WithBackoff bounds the sleep between attempts of a waiting Acquire: the
// n-th sleep is uniform in [min, min(max, min·2^n)], never past the holder's
// remaining TTL, cut short by a release message from any node. Defaults 10ms
// and 500ms; both positive, min <= max.
func WithBackoff(min, max time.Duration) Option {
	return func(c *config) { c.backoffMin, c.backoffMax = min, max }
}

// WithNotify sets whether a waiting Acquire listens for release messages on
// every node (default on). Releases always publish.
func WithNotify(on bool) Option { return func(c *config) { c.notify = on } }

// WithPrefix sets the prefix of every Redis key of a lock (default "lock:"),
// as in the core: the lock for K is prefix+"{K}" on each node. It must not
// contain '{' or '}'.
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithObserver sets the [lock.Observer] told of acquisitions, releases,
// extends, renewal failures and losses. nil (the default) means none.
func WithObserver(o lock.Observer) Option { return func(c *config) { c.observer = o } }

// WithLogger sets where renewal failures and losses (as warnings) and
// failed acquire attempts (at debug level; a warning at the third in a row
// and every tenth after) are logged. nil (the default) means silent.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithFencing sets whether holds carry a fence (default on; see [Lock.Fence]).
// It costs nothing on the round trip that acquires, and one more round trip,
// to the nodes concerned only, when the nodes' counters disagree. Off, Fence
// returns 0 and no counter key is written.
func WithFencing(on bool) Option { return func(c *config) { c.fencing = on } }

// WithQuorum sets how many nodes must confirm an acquisition, extend or
// renewal. Default 0: a majority, N/2+1. It must be a majority and at most N:
// a smaller quorum would let two holders in at once.
func WithQuorum(n int) Option { return func(c *config) { c.quorum = n } }

// WithDriftFactor sets the share of the TTL allowed for clock drift between
// the nodes and this process; a hold's validity is TTL − elapsed −
// (TTL·factor + 2ms). Default 0.01; valid range [0, 0.5).
func WithDriftFactor(f float64) Option { return func(c *config) { c.driftFactor = f } }

// WithNodeTimeout bounds each call to one node: a node that has not answered
// by then counts as failed for that round. Default 100ms; it must be positive,
// and the timeout used is never more than TTL/10. Keep it far below the TTL
// and above the slowest healthy round trip. Go-redis abandons the socket read
// at this deadline only on clients with ContextTimeoutEnabled; without it,
// redlock stops waiting at the deadline and the call ends in the background.
func WithNodeTimeout(d time.Duration) Option { return func(c *config) { c.nodeTimeout = d } }

func invalidf(format string, args ...any) error { return lease.Invalidf(format, args...) }
