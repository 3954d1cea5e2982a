// Package lockprom exports what the locks of an agentlock [lock.Client] do
// as Prometheus metrics.
//
// A [Collector] is both a [lock.Observer], to pass to [lock.WithObserver],
// and a [prometheus.Collector], to register:
//
//	col := lockprom.NewCollector()
//	prometheus.MustRegister(col)
//	locks := lock.NewClient(rdb, lock.WithObserver(col))
//
// The metrics (namespace "agentlock" unless [WithNamespace] says otherwise):
//
//	agentlock_acquires_total{outcome}           Acquire and TryAcquire calls: acquired, contended, canceled, error
//	agentlock_acquire_attempts_total            tries sent to Redis by those calls
//	agentlock_acquire_attempt_failures_total    tries that failed (Redis unreachable, error replies)
//	agentlock_wait_seconds                      histogram: time an acquisition that succeeded waited
//	agentlock_waiters                           gauge: Acquire and TryAcquire calls under way
//	agentlock_hold_seconds                      histogram: how long holds lasted, released or lost
//	agentlock_releases_total{outcome}           Release calls: released, not_held, error
//	agentlock_renewals_total                    renewals the renewal loop confirmed
//	agentlock_renewal_failures_total            renewal calls that failed (retried until the safety deadline)
//	agentlock_renewal_margin_seconds            histogram: validity a hold had left when its renewal was confirmed
//	agentlock_renewal_margin_ratio              histogram: the same, as a fraction of the hold's TTL
//	agentlock_losses_total{reason}              holds lost: stolen, expired, force_released, vanished, unreachable, unanswered, max_hold
//	agentlock_with_lock_seconds{outcome}        histogram: WithLock calls, acquire to release: ok, error
//	agentlock_limiter_calls_total{outcome}      rate limiter calls: acquired (took units), contended (refused), canceled, error
//	agentlock_limiter_units_total               units those calls took
//	agentlock_limiter_wait_seconds              histogram: time a call that took units lasted, its wait included
//
// Keys are not labels: there may be millions. [WithKeyGroup] adds a "group"
// label from a function of the key (e.g. [PrefixGroup]: "session:").
// Recording an event allocates nothing once its group has been seen, if
// the grouping function allocates nothing either.
package lockprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/eventlabel"
)

// Collector turns lock events into Prometheus metrics. It is a
// [lock.Observer] and a [prometheus.Collector]; it is safe for concurrent
// use and starts no goroutine. The zero value observes and collects
// nothing; use [NewCollector].
type Collector struct {
	m      *metrics
	groups *eventlabel.Groups[*series]
}

var (
	_ lock.Observer        = (*Collector)(nil)
	_ prometheus.Collector = (*Collector)(nil)
)

// Option configures a [Collector].
type Option func(*config)

type config struct {
	namespace string
	group     func(key string) string
	maxGroups int
}

// WithNamespace sets the metric names' first part; default "agentlock".
// An empty namespace leaves the names without one.
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithKeyGroup labels every metric with group, the value of fn for the
// lock's key: fn must map the keys to few groups (say "session:" for
// "session:42"), since each group is a set of series; it is called for
// every event, so it should be cheap and allocate nothing. Past maxGroups
// distinct groups (default 100 when maxGroups ≤ 0), new groups are counted
// as "other". A nil fn means no grouping: the default.
func WithKeyGroup(fn func(key string) string, maxGroups int) Option {
	return func(c *config) { c.group, c.maxGroups = fn, maxGroups }
}

// PrefixGroup is a key grouping for [WithKeyGroup]: the key up to and
// including its first ':' ("session:42" → "session:"), or the whole key
// when it has no ':'. It allocates nothing.
func PrefixGroup(key string) string { return eventlabel.PrefixGroup(key) }

// NewCollector returns a Collector configured by opts, to register with a
// Prometheus registry and to pass to [lock.WithObserver] (on a Client, a
// redlock Client, or one lock). One Collector may observe many Clients;
// register it once.
func NewCollector(opts ...Option) *Collector {
	cfg := config{namespace: "agentlock"}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	m := newMetrics(cfg.namespace, cfg.group != nil)
	return &Collector{m: m, groups: eventlabel.NewGroups(cfg.group, cfg.maxGroups, m.series)}
}

// Describe sends the descriptors of every metric of c.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	if c.m != nil {
		c.m.each(func(m prometheus.Collector) { m.Describe(ch) })
	}
}

// Collect sends the current value of every metric of c.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.m != nil {
		c.m.each(func(m prometheus.Collector) { m.Collect(ch) })
	}
}

// Observe records e. Kinds it does not know are ignored.
func (c *Collector) Observe(e lock.Event) {
	if c.m == nil {
		return
	}
	c.groups.Get(e.Key).observe(e)
}
