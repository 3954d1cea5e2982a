package lockprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/eventlabel"
)

// metrics are the vectors of a Collector; every one has the "group" label
// when grouped, and no other label but those named here.
type metrics struct {
	acquires        *prometheus.CounterVec
	attempts        *prometheus.CounterVec
	attemptFailures *prometheus.CounterVec
	wait            *prometheus.HistogramVec
	waiters         *prometheus.GaugeVec
	hold            *prometheus.HistogramVec
	releases        *prometheus.CounterVec
	renewals        *prometheus.CounterVec
	renewalFailures *prometheus.CounterVec
	margin          *prometheus.HistogramVec
	marginRatio     *prometheus.HistogramVec
	losses          *prometheus.CounterVec
	withLock        *prometheus.HistogramVec
	limits          *prometheus.CounterVec
	limitUnits      *prometheus.CounterVec
	limitWait       *prometheus.HistogramVec
	grouped         bool
}

func newMetrics(ns string, grouped bool) *metrics {
	var base []string
	if grouped {
		base = []string{"group"}
	}
	with := func(l string) []string { return append(append([]string(nil), base...), l) }
	counter := func(name, help string, labels []string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, b []float64, labels []string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: name, Help: help, Buckets: b}, labels)
	}
	return &metrics{
		acquires:        counter("acquires_total", "Acquire and TryAcquire calls, by outcome.", with("outcome")),
		attempts:        counter("acquire_attempts_total", "Acquire tries sent to Redis.", base),
		attemptFailures: counter("acquire_attempt_failures_total", "Acquire tries that failed (Redis unreachable, error replies).", base),
		wait:            histogram("wait_seconds", "Time an acquisition that succeeded waited.", eventlabel.WaitBuckets, base),
		waiters: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "waiters",
			Help: "Acquire and TryAcquire calls under way."}, base),
		hold:            histogram("hold_seconds", "How long holds lasted, until released or lost.", eventlabel.HoldBuckets, base),
		releases:        counter("releases_total", "Release calls, by outcome.", with("outcome")),
		renewals:        counter("renewals_total", "Renewals the renewal loop confirmed.", base),
		renewalFailures: counter("renewal_failures_total", "Renewal calls that failed.", base),
		margin:          histogram("renewal_margin_seconds", "Validity a hold had left when its renewal was confirmed.", eventlabel.HoldBuckets, base),
		marginRatio:     histogram("renewal_margin_ratio", "Validity a hold had left when its renewal was confirmed, as a fraction of its TTL.", eventlabel.RatioBuckets, base),
		losses:          counter("losses_total", "Holds lost, by reason.", with("reason")),
		withLock:        histogram("with_lock_seconds", "WithLock calls, from acquire to release, by outcome.", eventlabel.HoldBuckets, with("outcome")),
		limits:          counter("limiter_calls_total", "Rate limiter calls (Allow, Reserve, Wait), by outcome.", with("outcome")),
		limitUnits:      counter("limiter_units_total", "Units rate limiter calls took.", base),
		limitWait:       histogram("limiter_wait_seconds", "Time a rate limiter call that took units lasted, its wait included.", eventlabel.WaitBuckets, base),
		grouped:         grouped,
	}
}

// each calls fn with every vector.
func (m *metrics) each(fn func(prometheus.Collector)) {
	for _, c := range []prometheus.Collector{m.acquires, m.attempts, m.attemptFailures, m.wait, m.waiters,
		m.hold, m.releases, m.renewals, m.renewalFailures, m.margin, m.marginRatio, m.losses, m.withLock,
		m.limits, m.limitUnits, m.limitWait} {
		fn(c)
	}
}

// series are the metrics of one group, resolved once, so that recording
// an event is a few atomic operations.
type series struct {
	acquires        []prometheus.Counter
	attempts        prometheus.Counter
	attemptFailures prometheus.Counter
	wait            prometheus.Observer
	waiters         prometheus.Gauge
	hold            prometheus.Observer
	releases        []prometheus.Counter
	renewals        prometheus.Counter
	renewalFailures prometheus.Counter
	margin          prometheus.Observer
	marginRatio     prometheus.Observer
	losses          []prometheus.Counter
	withLock        []prometheus.Observer
	limits          []prometheus.Counter
	limitUnits      prometheus.Counter
	limitWait       prometheus.Observer
}

// series resolves the metrics of group g ("" when not grouped).
func (m *metrics) series(g string) *series {
	var base []string
	if m.grouped {
		base = []string{g}
	}
	with := func(l string) []string { return append(append([]string(nil), base...), l) }
	s := &series{
		attempts:        m.attempts.WithLabelValues(base...),
		attemptFailures: m.attemptFailures.WithLabelValues(base...),
		wait:            m.wait.WithLabelValues(base...),
		waiters:         m.waiters.WithLabelValues(base...),
		hold:            m.hold.WithLabelValues(base...),
		renewals:        m.renewals.WithLabelValues(base...),
		renewalFailures: m.renewalFailures.WithLabelValues(base...),
		margin:          m.margin.WithLabelValues(base...),
		marginRatio:     m.marginRatio.WithLabelValues(base...),
		limitUnits:      m.limitUnits.WithLabelValues(base...),
		limitWait:       m.limitWait.WithLabelValues(base...),
	}
	for _, n := range eventlabel.AcquireNames {
		s.acquires = append(s.acquires, m.acquires.WithLabelValues(with(n)...))
	}
	for _, n := range eventlabel.ReleaseNames {
		s.releases = append(s.releases, m.releases.WithLabelValues(with(n)...))
	}
	for _, n := range eventlabel.LossNames {
		s.losses = append(s.losses, m.losses.WithLabelValues(with(n)...))
	}
	for _, n := range eventlabel.AcquireNames {
		s.limits = append(s.limits, m.limits.WithLabelValues(with(n)...))
	}
	for _, n := range eventlabel.WithLockNames {
		s.withLock = append(s.withLock, m.withLock.WithLabelValues(with(n)...))
	}
	return s
}

// observe records e in s.
func (s *series) observe(e lock.Event) {
	switch e.Kind {
	case lock.EventAcquireStart:
		s.waiters.Inc()
	case lock.EventAcquire:
		s.waiters.Dec()
		o := eventlabel.AcquireOutcome(e.Err)
		s.acquires[o].Inc()
		s.attempts.Add(float64(e.Attempts))
		if o == eventlabel.Acquired {
			s.wait.Observe(e.Duration.Seconds())
		}
	case lock.EventAttemptFailed:
		s.attemptFailures.Inc()
	case lock.EventRelease:
		o := eventlabel.ReleaseOutcome(e.Err)
		s.releases[o].Inc()
		if o == eventlabel.Released {
			s.hold.Observe(e.Held.Seconds()) // a lost hold was counted at its loss
		}
	case lock.EventRenewed:
		s.renewals.Inc()
		s.margin.Observe(e.Validity.Seconds())
		if e.TTL > 0 {
			s.marginRatio.Observe(float64(e.Validity) / float64(e.TTL))
		}
	case lock.EventRenewalFailed:
		s.renewalFailures.Inc()
	case lock.EventLost:
		s.losses[eventlabel.LossReason(e.Err)].Inc()
		s.hold.Observe(e.Held.Seconds())
	case lock.EventWithLock:
		s.withLock[eventlabel.WithLockOutcome(e.Err)].Observe(e.Duration.Seconds())
	case lock.EventLimit:
		o := eventlabel.AcquireOutcome(e.Err)
		s.limits[o].Inc()
		if o == eventlabel.Acquired {
			s.limitUnits.Add(float64(e.Units))
			s.limitWait.Observe(e.Duration.Seconds())
		}
	}
}
