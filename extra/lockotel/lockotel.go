// Package lockotel reports what the locks of an agentlock [lock.Client] do
// to OpenTelemetry: metrics, and spans joined to the caller's trace.
// Spans are made only under an existing span: a call whose context carries
// no span (context.Background(), say) records metrics and no span, so start
// a span (or use instrumented handlers) around the calls to trace.
//
//	obs, err := lockotel.NewObserver() // the global MeterProvider and TracerProvider
//	if err != nil { ... }
//	locks := lock.NewClient(rdb, lock.WithObserver(obs))
//
// Metrics (instrument names; attributes in brackets):
//
//	agentlock.acquires                  counter: Acquire and TryAcquire calls [agentlock.outcome: acquired, contended, canceled, error]
//	agentlock.acquire.attempts          counter: tries sent to Redis
//	agentlock.acquire.attempt_failures  counter: tries that failed (Redis unreachable, error replies)
//	agentlock.acquire.wait              histogram, s: time an acquisition that succeeded waited
//	agentlock.waiters                   up-down counter: Acquire and TryAcquire calls under way
//	agentlock.hold.duration             histogram, s: how long holds lasted, released or lost
//	agentlock.releases                  counter: Release calls [agentlock.outcome: released, not_held, error]
//	agentlock.renewals                  counter: renewals the renewal loop confirmed
//	agentlock.renewal.failures          counter: renewal calls that failed
//	agentlock.renewal.margin            histogram, s: validity a hold had left when its renewal was confirmed
//	agentlock.renewal.margin_ratio      histogram, 1: the same, as a fraction of the hold's TTL
//	agentlock.losses                    counter: holds lost [agentlock.loss.reason: stolen, expired, force_released, vanished, unreachable, unanswered, max_hold]
//	agentlock.with_lock.duration        histogram, s: WithLock calls [agentlock.outcome: ok, error]
//	agentlock.limiter.calls             counter: rate limiter calls [agentlock.outcome: acquired, contended, canceled, error]
//	agentlock.limiter.units             counter: units those calls took
//	agentlock.limiter.wait              histogram, s: time a call that took units lasted, its wait included
//
// Spans: "agentlock.acquire", "agentlock.release" and "agentlock.with_lock",
// children of the span in the call's context ([lock.Event].Ctx), each
// covering its call, with the attributes agentlock.fence,
// agentlock.attempts (acquire), agentlock.held_seconds (release,
// with_lock) and agentlock.outcome; the status is Error when the call
// failed (for acquire: not for want of the lock, nor because its context
// ended). A failed try is an event "agentlock.attempt_failed" on the
// caller's span. A call whose context carries no span makes none. The
// with_lock span starts when WithLock (or a kind's WithX) begins: the
// Observer is a [lock.ContextObserver], and the context the call goes on
// with carries that span, so the acquire and release spans inside it, and
// the spans fn starts from its context, are its children. The acquire and
// release spans are made when their calls end, from their durations.
// Losses and renewals happen in the background: they are metrics only.
//
// Keys are not attributes by default: there may be millions.
// [WithKeyGroup] adds agentlock.key.group from a function of the key.
package lockotel

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/eventlabel"
)

// scope is the instrumentation scope of the meter and the tracer.
const scope = "github.com/agentlock/lock/extra/lockotel"

// Attribute keys.
const (
	keyGroup   = attribute.Key("agentlock.key.group")
	keyOutcome = attribute.Key("agentlock.outcome")
	keyReason  = attribute.Key("agentlock.loss.reason")
	keyFence   = attribute.Key("agentlock.fence")
	keyAttempt = attribute.Key("agentlock.attempts")
	keyHeld    = attribute.Key("agentlock.held_seconds")
)

// Option configures [NewObserver].
type Option func(*config)

type config struct {
	mp        metric.MeterProvider
	tp        trace.TracerProvider
	group     func(string) string
	maxGroups int
}

// WithMeterProvider sets where the metrics go; default (or nil) the global
// one, [otel.GetMeterProvider].
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithTracerProvider sets where the spans go; default (or nil) the global
// one, [otel.GetTracerProvider].
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithKeyGroup adds the attribute agentlock.key.group, the value of fn for
// the lock's key, to every metric and span: fn must map the keys to few
// groups (say "session:" for "session:42"), and should be cheap. Past
// maxGroups distinct groups (default 100 when maxGroups ≤ 0), new groups
// are reported as "other". A nil fn means no grouping: the default.
func WithKeyGroup(fn func(key string) string, maxGroups int) Option {
	return func(c *config) { c.group, c.maxGroups = fn, maxGroups }
}

// PrefixGroup is a key grouping for [WithKeyGroup]: the key up to and
// including its first ':' ("session:42" → "session:"), or the whole key
// when it has no ':'.
func PrefixGroup(key string) string { return eventlabel.PrefixGroup(key) }

// observer is the lock.Observer NewObserver returns.
type observer struct {
	inst   *instruments
	tracer trace.Tracer
	groups *eventlabel.Groups[*series]
}

// NewObserver returns a [lock.Observer] that records lock events as
// OpenTelemetry metrics and spans (see the package comment); it is also a
// [lock.ContextObserver], which [lock.Observers] keeps. It returns
// the meter's error if an instrument cannot be made. The Observer is safe
// for concurrent use and starts no goroutine.
func NewObserver(opts ...Option) (lock.Observer, error) {
	var cfg config
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	inst, err := newInstruments(cfg.mp.Meter(scope))
	if err != nil {
		return nil, err
	}
	return &observer{inst: inst, tracer: cfg.tp.Tracer(scope), groups: eventlabel.NewGroups(cfg.group, cfg.maxGroups, newSeries)}, nil
}

// Observe records e.
func (o *observer) Observe(e lock.Event) {
	ctx := e.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	s := o.groups.Get(e.Key)
	o.inst.record(ctx, s, e)
	switch e.Kind {
	case lock.EventAcquire:
		out := eventlabel.AcquireOutcome(e.Err)
		o.span(ctx, s, "agentlock.acquire", e, eventlabel.AcquireNames[out], out == eventlabel.Failed,
			keyAttempt.Int(e.Attempts))
	case lock.EventRelease:
		out := eventlabel.ReleaseOutcome(e.Err)
		o.span(ctx, s, "agentlock.release", e, eventlabel.ReleaseNames[out], out != eventlabel.Released,
			keyHeld.Float64(e.Held.Seconds()))
	case lock.EventWithLock:
		out := eventlabel.WithLockOutcome(e.Err)
		if sp, ok := ctx.Value(withLockSpan{}).(trace.Span); ok {
			// Opened by ObserveContext when the call began.
			o.endWithLock(sp, e, eventlabel.WithLockNames[out])
			break
		}
		o.span(ctx, s, "agentlock.with_lock", e, eventlabel.WithLockNames[out], e.Err != nil, keyHeld.Float64(e.Held.Seconds()))
	case lock.EventAttemptFailed:
		if sp := trace.SpanFromContext(ctx); sp.IsRecording() {
			sp.AddEvent("agentlock.attempt_failed", trace.WithAttributes(keyAttempt.Int(e.Attempts),
				attribute.String("exception.message", errText(e.Err))))
		}
	}
}

// span records the call e reports as a span that ends now and began
// e.Duration ago, a child of ctx's span; none when ctx carries no span, so
// that calls outside any trace cost nothing.
func (o *observer) span(ctx context.Context, s *series, name string, e lock.Event, outcome string, isErr bool, extra attribute.KeyValue) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	end := time.Now()
	attrs := make([]attribute.KeyValue, 0, 3+len(s.attrs))
	attrs = append(attrs, s.attrs...)
	attrs = append(attrs, keyOutcome.String(outcome), keyFence.Int64(e.Fence), extra)
	_, sp := o.tracer.Start(ctx, name, trace.WithTimestamp(end.Add(-e.Duration)),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	if isErr {
		sp.SetStatus(codes.Error, errText(e.Err))
	}
	sp.End(trace.WithTimestamp(end))
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
