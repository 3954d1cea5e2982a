package redlock

import (
	"context"
	"errors"
	"fmt"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/lease"
)

// QuorumError reports an attempt that did not reach its quorum: how many
// nodes confirmed, how many were needed, and what each node said. It
// matches [lock.ErrNotAcquired] under errors.Is, and every node's error.
type QuorumError struct {
	Reached int     // nodes that confirmed
	Needed  int     // the quorum
	Errs    []error // one per node, in the order given to New; nil for a node that confirmed
}

// Error summarises the count and the nodes' errors.
func (e *QuorumError) Error() string {
	msg := fmt.Sprintf("redlock: quorum not reached: %d of %d nodes confirmed, %d needed", e.Reached, len(e.Errs), e.Needed)
	for i, err := range e.Errs {
		if err != nil {
			msg += fmt.Sprintf("; node %d: %s", i, lease.Bare(err))
		}
	}
	return msg
}

// Unwrap yields [lock.ErrNotAcquired] and every non-nil node error.
func (e *QuorumError) Unwrap() []error {
	out := make([]error, 0, len(e.Errs)+1)
	out = append(out, lock.ErrNotAcquired)
	for _, err := range e.Errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

var (
	// errHeldByOther is a node's error when it holds someone else's token.
	errHeldByOther = errors.New("redlock: held by another holder")
	// errNodeTimeout is a node's error when it did not answer in time.
	errNodeTimeout = fmt.Errorf("redlock: node timeout: %w", context.DeadlineExceeded)
	// errNotOurs is a node's error when our token is not there.
	errNotOurs = errors.New("redlock: hold not on node")
	// errFenceRaise leads a node's error in the fence round.
	errFenceRaise = errors.New("redlock: fence raise")
	// errValidity reports an acquisition whose validity ran out before it
	// completed.
	errValidity = errors.New("redlock: no validity left")
)
