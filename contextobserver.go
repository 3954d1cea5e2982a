package lock

import (
	"context"

	"github.com/agentlock/lock/internal/lease"
)

// ContextObserver is an [Observer] that also shapes the context of a
// [Client.WithLock] call (and of each kind's WithX), so that a tracing
// Observer can open a span around the whole call. ObserveContext is called
// when the call begins, on the caller's goroutine, with the caller's ctx
// and an [EventWithLockStart]; the context it returns (nil means ctx) is
// the one the acquire, fn and the release run with, and the Ctx of their
// events and of the call's closing [EventWithLock]. It should derive that
// context from ctx, return quickly and be safe for concurrent use.
// Observers that do not implement it are told only through Observe, as
// before; [Observers] forwards it to the observers that do.
type ContextObserver interface {
	Observer
	ObserveContext(ctx context.Context, e Event) context.Context
}

// contextObserverFunc adapts o to the engine's WithLock start, or returns
// nil when o is no ContextObserver (or a fan-out with none among its
// observers).
func contextObserverFunc(o Observer) func(context.Context, lease.Event) context.Context {
	co, ok := o.(ContextObserver)
	if !ok {
		return nil
	}
	if f, ok := o.(*fanOut); ok && !f.shapesContext() {
		return nil
	}
	return func(ctx context.Context, e lease.Event) context.Context {
		return co.ObserveContext(ctx, Event{Kind: EventKind(e.Kind), Key: e.Key, Ctx: e.Ctx})
	}
}

// ObserveContext passes ctx and e to each of f's observers that is a
// [ContextObserver], in order, each getting the context the one before
// returned; it returns the last one.
func (f *fanOut) ObserveContext(ctx context.Context, e Event) context.Context {
	for _, o := range f.list {
		if co, ok := o.(ContextObserver); ok {
			if c := co.ObserveContext(ctx, e); c != nil {
				ctx = c
			}
			e.Ctx = ctx
		}
	}
	return ctx
}

// shapesContext reports whether any of f's observers is a ContextObserver.
func (f *fanOut) shapesContext() bool {
	for _, o := range f.list {
		if co, ok := o.(ContextObserver); ok {
			if g, ok := co.(*fanOut); !ok || g.shapesContext() {
				return true
			}
		}
	}
	return false
}
