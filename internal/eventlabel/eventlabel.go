// Package eventlabel is what the observability adapters (extra/lockprom,
// extra/lockotel) share: the label values of lock events' outcomes and
// loss reasons, and the per-group cache that lets them record an event
// without allocating.
package eventlabel

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/agentlock/lock"
)

// The outcomes of Acquire and TryAcquire, indexes into AcquireNames.
const (
	Acquired = iota
	Contended
	Canceled
	Failed
)

// AcquireNames are the label values of the acquire outcomes.
var AcquireNames = []string{Acquired: "acquired", Contended: "contended", Canceled: "canceled", Failed: "error"}

// AcquireOutcome classifies the Err of an EventAcquire: nil, the caller's
// context ended, no lock for want of it (ErrNotAcquired), anything else.
func AcquireOutcome(err error) int {
	switch {
	case err == nil:
		return Acquired
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Canceled
	case errors.Is(err, lock.ErrNotAcquired):
		return Contended
	default:
		return Failed
	}
}

// The outcomes of Release, indexes into ReleaseNames.
const (
	Released = iota
	NotHeld
	ReleaseFailed
)

// ReleaseNames are the label values of the release outcomes.
var ReleaseNames = []string{Released: "released", NotHeld: "not_held", ReleaseFailed: "error"}

// ReleaseOutcome classifies the Err of an EventRelease.
func ReleaseOutcome(err error) int {
	switch {
	case err == nil:
		return Released
	case errors.Is(err, lock.ErrNotHeld):
		return NotHeld
	default:
		return ReleaseFailed
	}
}

// WithLockNames are the label values of WithLock's outcomes: index 0 when
// it returned nil, 1 otherwise.
var WithLockNames = []string{"ok", "error"}

// WithLockOutcome classifies the Err of an EventWithLock.
func WithLockOutcome(err error) int {
	if err == nil {
		return 0
	}
	return 1
}

// LossNames are the label values of the loss reasons, indexed by
// lock.LossReason; 0 is any reason this version does not know.
var LossNames = []string{
	0:                      "other",
	lock.LossStolen:        "stolen",
	lock.LossExpired:       "expired",
	lock.LossForceReleased: "force_released",
	lock.LossUnreachable:   "unreachable",
	lock.LossMaxHold:       "max_hold",
	lock.LossUnanswered:    "unanswered",
	lock.LossVanished:      "vanished",
}

// LossReason is the index in LossNames of the reason of an EventLost's
// Err.
func LossReason(err error) int {
	var le *lock.LostError
	if errors.As(err, &le) && int(le.Reason) > 0 && int(le.Reason) < len(LossNames) {
		return int(le.Reason)
	}
	return 0
}

// PrefixGroup is the key up to and including its first ':' ("session:42"
// → "session:"), or the whole key when it has no ':'. It allocates
// nothing.
func PrefixGroup(key string) string {
	if i := strings.IndexByte(key, ':'); i >= 0 {
		return key[:i+1]
	}
	return key
}

// Other is the group of the keys past a Groups' limit.
const Other = "other"

// DefaultMaxGroups is the limit of distinct groups when none is given.
const DefaultMaxGroups = 100

// Groups keeps one S (an adapter's resolved metrics) per key group, made
// once by its newS function: Get allocates nothing for a group already
// seen. Safe for concurrent use.
type Groups[S any] struct {
	fn   func(key string) string
	max  int
	newS func(group string) S
	none S

	mu sync.RWMutex
	m  map[string]S
}

// NewGroups returns the groups of fn (nil: one S for every key, made with
// group ""), at most max of them (≤ 0: DefaultMaxGroups); past that, keys
// of new groups get the S of Other.
func NewGroups[S any](fn func(key string) string, max int, newS func(group string) S) *Groups[S] {
	if max <= 0 {
		max = DefaultMaxGroups
	}
	g := &Groups[S]{fn: fn, max: max, newS: newS}
	if fn == nil {
		g.none = newS("")
	} else {
		g.m = make(map[string]S)
	}
	return g
}

// Grouped reports whether keys are grouped.
func (g *Groups[S]) Grouped() bool { return g.fn != nil }

// Get returns the S of key's group.
func (g *Groups[S]) Get(key string) S {
	if g.fn == nil {
		return g.none
	}
	name := g.fn(key)
	g.mu.RLock()
	s, ok := g.m[name]
	g.mu.RUnlock()
	if ok {
		return s
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if s, ok = g.m[name]; ok {
		return s
	}
	if len(g.m) >= g.max {
		name = Other
		if s, ok = g.m[name]; ok {
			return s
		}
	}
	s = g.newS(name)
	g.m[name] = s
	return s
}

// Histogram bucket bounds both adapters use, in seconds (RatioBuckets: a
// fraction of the TTL).
var (
	// WaitBuckets: 0.5ms to about 65s, doubling.
	WaitBuckets = exponential(0.0005, 18)
	// HoldBuckets: 1ms to about 524s, doubling.
	HoldBuckets = exponential(0.001, 20)
	// RatioBuckets: fine below a fifth, where the renewal margin alert is.
	RatioBuckets = []float64{0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}
)

// exponential returns n bounds from start, doubling.
func exponential(start float64, n int) []float64 {
	b := make([]float64, n)
	for i := range b {
		b[i] = start
		start *= 2
	}
	return b
}
