package lockotel

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentlock/lock"
)

// withLockSpan is the context key of the "agentlock.with_lock" span that
// ObserveContext opened: the call's EventWithLock ends it.
type withLockSpan struct{}

// ObserveContext opens the "agentlock.with_lock" span when a WithLock call
// begins under a span, and returns the caller's context carrying it: the
// acquire, fn and the release then run under it. Without a span in ctx, or
// for any other event, it returns ctx.
func (o *observer) ObserveContext(ctx context.Context, e lock.Event) context.Context {
	if e.Kind != lock.EventWithLockStart || !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	s := o.groups.Get(e.Key)
	ctx, sp := o.tracer.Start(ctx, "agentlock.with_lock",
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(s.attrs...))
	return context.WithValue(ctx, withLockSpan{}, sp)
}

// endWithLock ends sp, the span of the WithLock call e reports, with its
// outcome, fence and hold time.
func (o *observer) endWithLock(sp trace.Span, e lock.Event, outcome string) {
	sp.SetAttributes(keyOutcome.String(outcome), keyFence.Int64(e.Fence), keyHeld.Float64(e.Held.Seconds()))
	if e.Err != nil {
		sp.SetStatus(codes.Error, errText(e.Err))
	}
	sp.End()
}

var _ lock.ContextObserver = (*observer)(nil)
