package lockotel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/eventlabel"
)

// instruments are the Observer's metrics.
type instruments struct {
	acquires        metric.Int64Counter
	attempts        metric.Int64Counter
	attemptFailures metric.Int64Counter
	wait            metric.Float64Histogram
	waiters         metric.Int64UpDownCounter
	hold            metric.Float64Histogram
	releases        metric.Int64Counter
	renewals        metric.Int64Counter
	renewalFailures metric.Int64Counter
	margin          metric.Float64Histogram
	marginRatio     metric.Float64Histogram
	losses          metric.Int64Counter
	withLock        metric.Float64Histogram
	limits          metric.Int64Counter
	limitUnits      metric.Int64Counter
	limitWait       metric.Float64Histogram
}

// newInstruments makes every instrument on m; the first error is returned.
func newInstruments(m metric.Meter) (*instruments, error) {
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	counter := func(name, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit("{call}"))
		keep(err)
		return c
	}
	histogram := func(name, desc, unit string, b []float64) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit(unit),
			metric.WithExplicitBucketBoundaries(b...))
		keep(err)
		return h
	}
	waiters, err := m.Int64UpDownCounter("agentlock.waiters", metric.WithDescription("Acquire and TryAcquire calls under way."),
		metric.WithUnit("{call}"))
	keep(err)
	in := &instruments{
		acquires:        counter("agentlock.acquires", "Acquire and TryAcquire calls, by outcome."),
		attempts:        counter("agentlock.acquire.attempts", "Acquire tries sent to Redis."),
		attemptFailures: counter("agentlock.acquire.attempt_failures", "Acquire tries that failed (Redis unreachable, error replies)."),
		wait:            histogram("agentlock.acquire.wait", "Time an acquisition that succeeded waited.", "s", eventlabel.WaitBuckets),
		waiters:         waiters,
		hold:            histogram("agentlock.hold.duration", "How long holds lasted, until released or lost.", "s", eventlabel.HoldBuckets),
		releases:        counter("agentlock.releases", "Release calls, by outcome."),
		renewals:        counter("agentlock.renewals", "Renewals the renewal loop confirmed."),
		renewalFailures: counter("agentlock.renewal.failures", "Renewal calls that failed."),
		margin:          histogram("agentlock.renewal.margin", "Validity a hold had left when its renewal was confirmed.", "s", eventlabel.HoldBuckets),
		marginRatio:     histogram("agentlock.renewal.margin_ratio", "Validity a hold had left when its renewal was confirmed, as a fraction of its TTL.", "1", eventlabel.RatioBuckets),
		losses:          counter("agentlock.losses", "Holds lost, by reason."),
		withLock:        histogram("agentlock.with_lock.duration", "WithLock calls, from acquire to release, by outcome.", "s", eventlabel.HoldBuckets),
		limits:          counter("agentlock.limiter.calls", "Rate limiter calls (Allow, Reserve, Wait), by outcome."),
		limitWait:       histogram("agentlock.limiter.wait", "Time a rate limiter call that took units lasted, its wait included.", "s", eventlabel.WaitBuckets),
	}
	in.limitUnits, err = m.Int64Counter("agentlock.limiter.units", metric.WithDescription("Units rate limiter calls took."),
		metric.WithUnit("{unit}"))
	keep(err)
	return in, first
}

// series are the attribute options of one key group, made once, so that
// recording an event allocates nothing.
type series struct {
	attrs    []attribute.KeyValue // the group's, for spans
	add      []metric.AddOption
	rec      []metric.RecordOption
	acquires [][]metric.AddOption // by outcome
	releases [][]metric.AddOption
	losses   [][]metric.AddOption // by reason
	withLock [][]metric.RecordOption
}

// newSeries returns the options of group ("" when keys are not grouped).
func newSeries(group string) *series {
	s := &series{}
	if group != "" {
		s.attrs = []attribute.KeyValue{keyGroup.String(group)}
	}
	set := func(kv ...attribute.KeyValue) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(append(append([]attribute.KeyValue(nil), s.attrs...), kv...)...))
	}
	base := set()
	s.add, s.rec = []metric.AddOption{base}, []metric.RecordOption{base}
	for _, n := range eventlabel.AcquireNames {
		s.acquires = append(s.acquires, []metric.AddOption{set(keyOutcome.String(n))})
	}
	for _, n := range eventlabel.ReleaseNames {
		s.releases = append(s.releases, []metric.AddOption{set(keyOutcome.String(n))})
	}
	for _, n := range eventlabel.LossNames {
		s.losses = append(s.losses, []metric.AddOption{set(keyReason.String(n))})
	}
	for _, n := range eventlabel.WithLockNames {
		s.withLock = append(s.withLock, []metric.RecordOption{set(keyOutcome.String(n))})
	}
	return s
}

// record adds e to the metrics.
func (in *instruments) record(ctx context.Context, s *series, e lock.Event) {
	switch e.Kind {
	case lock.EventAcquireStart:
		in.waiters.Add(ctx, 1, s.add...)
	case lock.EventAcquire:
		in.waiters.Add(ctx, -1, s.add...)
		o := eventlabel.AcquireOutcome(e.Err)
		in.acquires.Add(ctx, 1, s.acquires[o]...)
		in.attempts.Add(ctx, int64(e.Attempts), s.add...)
		if o == eventlabel.Acquired {
			in.wait.Record(ctx, e.Duration.Seconds(), s.rec...)
		}
	case lock.EventAttemptFailed:
		in.attemptFailures.Add(ctx, 1, s.add...)
	case lock.EventRelease:
		o := eventlabel.ReleaseOutcome(e.Err)
		in.releases.Add(ctx, 1, s.releases[o]...)
		if o == eventlabel.Released {
			in.hold.Record(ctx, e.Held.Seconds(), s.rec...) // a lost hold was counted at its loss
		}
	case lock.EventRenewed:
		in.renewals.Add(ctx, 1, s.add...)
		in.margin.Record(ctx, e.Validity.Seconds(), s.rec...)
		if e.TTL > 0 {
			in.marginRatio.Record(ctx, float64(e.Validity)/float64(e.TTL), s.rec...)
		}
	case lock.EventRenewalFailed:
		in.renewalFailures.Add(ctx, 1, s.add...)
	case lock.EventLost:
		in.losses.Add(ctx, 1, s.losses[eventlabel.LossReason(e.Err)]...)
		in.hold.Record(ctx, e.Held.Seconds(), s.rec...)
	case lock.EventWithLock:
		in.withLock.Record(ctx, e.Duration.Seconds(), s.withLock[eventlabel.WithLockOutcome(e.Err)]...)
	case lock.EventLimit:
		o := eventlabel.AcquireOutcome(e.Err)
		in.limits.Add(ctx, 1, s.acquires[o]...) // the same outcomes as an acquire's
		if o == eventlabel.Acquired {
			in.limitUnits.Add(ctx, e.Units, s.add...)
			in.limitWait.Record(ctx, e.Duration.Seconds(), s.rec...)
		}
	}
}
