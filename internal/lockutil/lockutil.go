// Package lockutil holds the small pieces the core lock and redlock share:
// the waiting backoff, error joining and time helpers.
package lockutil

import (
	"errors"
	"math/rand/v2"
	"time"
)

// Backoff returns the n-th sleep of a waiting acquire: uniform in
// [lo, min(hi, lo·2^n)], exponential backoff with jitter. It does not
// overflow for any n or bounds.
func Backoff(lo, hi time.Duration, n int) time.Duration {
	ceil := lo
	for i := 0; i < n && ceil < hi; i++ {
		if ceil > hi/2 {
			ceil = hi
			break
		}
		ceil *= 2
	}
	ceil = min(ceil, hi)
	if ceil <= lo {
		return lo
	}
	return lo + rand.N(ceil-lo+1)
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

// MinTime returns the earlier of a and b.
func MinTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
