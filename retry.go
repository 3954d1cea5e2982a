package lock

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// transientPrefixes are Redis error replies that pass: a server loading its
// data, a cluster resharding or electing, a replica promoted under us.
var transientPrefixes = []string{"LOADING", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "BUSY"}

// retryable reports whether a failed attempt may succeed if sent again:
// network failures and the transient replies above. Anything else (NOPERM,
// WRONGTYPE, a script error, a closed client) will fail the same way again.
func retryable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.Is(err, redis.ErrClosed):
		return false
	case networkFailure(err):
		return true
	}
	for _, p := range transientPrefixes {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// networkFailure reports whether err is a failure to reach Redis: a
// network error (dial, reset, closed connection, timeout) or an empty
// connection pool. The caller rules out context errors first.
func networkFailure(err error) bool {
	switch {
	case errors.Is(err, redis.ErrPoolTimeout),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE):
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}
