package lease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

// The reason of a loss by deadline follows the renewal error the hold kept:
// unanswered for timeouts and no reply, unreachable for a connection that
// failed or any other error, also when a timeout follows it.
func TestFailedReason(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	dialTimeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	nodeTimeout := fmt.Errorf("redlock: node timeout: %w", context.DeadlineExceeded)
	for _, tt := range []struct {
		name string
		err  error
		want Reason
	}{
		{"no reply at all", nil, LossUnanswered},
		{"safety deadline", ErrRenewalTimeout, LossUnanswered},
		{"ctx deadline", context.DeadlineExceeded, LossUnanswered},
		{"read timeout", readTimeout, LossUnanswered},
		{"nodes timed out", errors.Join(ErrNotAcquired, nodeTimeout, nil, nodeTimeout), LossUnanswered},
		{"dial refused", refused, LossUnreachable},
		{"dial timeout", dialTimeout, LossUnreachable},
		{"connection reset", reset, LossUnreachable},
		{"EOF", fmt.Errorf("read: %w", io.EOF), LossUnreachable},
		{"a node refused, others timed out", errors.Join(ErrNotAcquired, nodeTimeout, refused), LossUnreachable},
		{"error reply", errors.New("OOM command not allowed"), LossUnreachable},
		{"timeout after refused", lastFailure(refused, context.DeadlineExceeded), LossUnreachable},
		{"timeout after timeout", lastFailure(readTimeout, context.DeadlineExceeded), LossUnanswered},
		{"refused after timeout", lastFailure(readTimeout, refused), LossUnreachable},
	} {
		if got := failedReason(tt.err); got != tt.want {
			t.Errorf("%s: failedReason(%v) = %s, want %s", tt.name, tt.err, got.String(), tt.want.String())
		}
	}
}
