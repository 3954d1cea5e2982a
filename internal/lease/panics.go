package lease

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
)

// ErrPanicked is wrapped by the error of work the library ran on a
// goroutine of its own, with no caller to hand a panic to, when a call it
// made there panicked (a go-redis hook, an Observer, a logger): a renewal
// call, an undo, a shared pipeline led from the background, a redlock
// node's call. The root package re-exports it.
var ErrPanicked = errors.New("lock: call panicked")

// panicError is the error of background work what whose call panicked
// with val. It matches ErrPanicked.
type panicError struct {
	what string
	val  any
}

func (e *panicError) Error() string {
	return fmt.Sprintf("lock: %s panicked: %v", e.what, e.val)
}

func (e *panicError) Unwrap() error { return ErrPanicked }

// Recovered returns the error of background work what (a "renewal call",
// an "undo") whose call panicked with v, the non-nil value recover
// returned, and logs the panic once at Error level through lg (nil:
// silent) with its value and stack, and args as further attributes. Call
// it from the deferred function that recovered: the stack then still shows
// where the panic began.
func Recovered(lg *slog.Logger, what string, v any, args ...any) error {
	logPanic(lg, "lock: "+what+" panicked on a background goroutine", v, args...)
	return &panicError{what: what, val: v}
}

// logPanic logs msg at Error level through lg (nil: silent) with args, the
// panic's value v and the stack of the deferred function that recovered it.
func logPanic(lg *slog.Logger, msg string, v any, args ...any) {
	if lg != nil {
		args = append(args, slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
		lg.Error(msg, args...)
	}
}

// fixOnPanic, deferred by a verb whose call runs while its caller waits,
// lets a panic of that call (a go-redis hook, an Observer) go on to the
// caller, after fix has set the lock's state as after a call of unknown
// outcome. fix gets the panic's value.
func fixOnPanic(fix func(v any)) {
	if v := recover(); v != nil {
		fix(v)
		panic(v)
	}
}

// Survive, deferred on a goroutine of e's own (or a kind's), recovers a
// panic of its work (what) and logs it through e's logger (see
// Recovered): the goroutine then ends as if its work had returned. Defer
// it after what signals the work's end (a WaitGroup's Done, a channel's
// close), so that it runs first.
func (e *Engine) Survive(what string) {
	if v := recover(); v != nil {
		Recovered(e.Logger, what, v)
	}
}
