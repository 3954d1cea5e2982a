package lease

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// failedReason names the loss of a hold that no renewal confirmed by its
// deadline; err is the renewal error it kept (see lastFailure; nil: none
// came back).
// LossUnanswered when err shows only that no reply came in time (a
// timeout, or nothing at all); LossUnreachable when it shows a connection
// that failed (a dial error; a refused, reset or closed connection) or any
// other error.
func failedReason(err error) Reason {
	if err == nil || (!anyErr(err, connFailed) && anyErr(err, timedOut)) {
		return LossUnanswered
	}
	return LossUnreachable
}

// lastFailure returns the renewal error a hold keeps (and a loss reports)
// of prev, the one kept so far, and err, the newest: err, unless prev shows
// a connection that failed and err does not (a timeout after a refused dial
// says less about why).
func lastFailure(prev, err error) error {
	if prev != nil && anyErr(prev, connFailed) && !anyErr(err, connFailed) {
		return prev
	}
	return err
}

// connFailed reports whether err, one error of a chain, says that a
// connection could not be made or broke.
func connFailed(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && (op.Op == "dial" || !op.Timeout()) {
		return true
	}
	for _, target := range [...]error{io.EOF, io.ErrUnexpectedEOF, net.ErrClosed,
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EPIPE} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// timedOut reports whether err, one error of a chain, says that no reply
// came in time.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.Is(err, ErrRenewalTimeout) || errors.Is(err, errNoAnswer) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// anyErr reports whether fn holds for err or any error it wraps, following
// every branch of a multi-error (errors.As and errors.Is stop at the first
// match, which may be the branch fn rejects).
func anyErr(err error, fn func(error) bool) bool {
	if err == nil {
		return false
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if anyErr(e, fn) {
				return true
			}
		}
		return false
	case interface{ Unwrap() error }:
		if inner := u.Unwrap(); inner != nil && anyErr(inner, fn) {
			return true
		}
	}
	return fn(err)
}
