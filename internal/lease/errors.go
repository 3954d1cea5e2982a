package lease

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The sentinels every kind returns; the root package re-exports them and
// documents which calls return each.
var (
	ErrNotAcquired = errors.New("lock: not acquired")
	ErrNotHeld     = errors.New("lock: not held")
	ErrLockLost    = errors.New("lock: lock lost")
	ErrClosed      = errors.New("lock: client closed")
	ErrInvalid     = errors.New("lock: invalid argument")
)

// Invalidf returns an error wrapping ErrInvalid: "invalid argument: " and
// the formatted text.
func Invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// OpError is the error of one verb on one key, shaped like os.PathError:
// `lock: release "k": not held`. Its text says the package prefix once:
// the wrapped error's own "lock: " or "redlock: " prefix is dropped.
type OpError struct {
	Pkg string // "lock" or "redlock"
	Op  string // the verb: "acquire", "release", "extend", "ttl", "key", "with lock"
	Key string // the caller's key
	Err error  // what went wrong
}

// NewOpError returns the error of verb op of package pkg on key: errs in
// turn, most general first ("not held", then why).
func NewOpError(pkg, op, key string, errs ...error) *OpError {
	e := &OpError{Pkg: pkg, Op: op, Key: key}
	e.Err = Chain(errs...)
	return e
}

// Chain returns errs said in turn, most general first, each without its
// package prefix ("not held: lock \"k\" lost (stolen)"); it matches each
// of them. A single error is returned as it is.
func Chain(errs ...error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return &chain{errs}
}

// Error reports the package, the verb, the key and the error.
func (e *OpError) Error() string {
	return e.Pkg + ": " + e.Op + " " + strconv.Quote(e.Key) + ": " + Bare(e.Err)
}

// Unwrap yields the error.
func (e *OpError) Unwrap() error { return e.Err }

// chain is several errors said in turn, each without its package prefix:
// "not held: lock \"k\" lost (stolen)".
type chain struct{ errs []error }

func (c *chain) Error() string {
	var b strings.Builder
	for i, err := range c.errs {
		if i > 0 {
			b.WriteString(": ")
		}
		b.WriteString(Bare(err))
	}
	return b.String()
}

func (c *chain) Unwrap() []error { return c.errs }

// Bare returns err's text without a leading "lock: " or "redlock: ", for
// an error that another one's text includes.
func Bare(err error) string {
	s := err.Error()
	for _, p := range [...]string{"redlock: ", "lock: "} {
		if t, ok := strings.CutPrefix(s, p); ok {
			return t
		}
	}
	return s
}

// JoinErrs is errors.Join, except that a single error is returned as it is,
// so callers may still compare it with ==.
func JoinErrs(errs ...error) error {
	var only error
	n := 0
	for _, e := range errs {
		if e != nil {
			only = e
			n++
		}
	}
	if n <= 1 {
		return only
	}
	return errors.Join(errs...)
}

// Reason says why a hold ended involuntarily. The root package names it
// lock.LossReason (a type alias) and its values, so each is defined here
// alone.
type Reason int

// The reasons. Add new ones at the end: the values are public.
const (
	LossStolen Reason = iota + 1
	LossExpired
	LossForceReleased
	LossUnreachable
	LossMaxHold
	LossUnanswered
	LossVanished
)

var reasonNames = [...]string{
	LossStolen:        "stolen",
	LossExpired:       "expired",
	LossForceReleased: "force-released",
	LossUnreachable:   "unreachable",
	LossMaxHold:       "max hold reached",
	LossUnanswered:    "unanswered",
	LossVanished:      "vanished",
}

// String returns the reason in a word or two, as used in messages, or
// "LossReason(n)" for a value that is none of the reasons.
func (r Reason) String() string {
	if r > 0 && int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "LossReason(" + strconv.Itoa(int(r)) + ")"
}
