package lock

import "time"

// Rate is how fast a [Limiter] lets units through: N units per Per, with
// bursts of up to Burst units at once (0 means N). One unit is paid for
// every Per/N; an idle limiter saves up to Burst units, and no single
// call may take more than Burst. N and Burst must be at least 1 (Burst 0
// meaning N), Per at least a millisecond; anything else is [ErrInvalid].
type Rate struct {
	N     int64         // units per Per
	Per   time.Duration // the period N units take
	Burst int64         // the most units at once; 0 means N
}

// maxRateUnits bounds N and Burst, so that their products with a unit's
// cost in microseconds stay exact in the scripts' floating point.
const maxRateUnits = 1 << 40

// burst returns the Rate's burst, N when Burst is 0.
func (r Rate) burst() int64 {
	if r.Burst == 0 {
		return r.N
	}
	return r.Burst
}

// validate returns the error, wrapping ErrInvalid, of a Rate no limiter
// can keep, or nil.
func (r Rate) validate() error {
	switch {
	case r.N < 1 || r.N > maxRateUnits:
		return invalidf("rate of %d units: N must be in [1, %d]", r.N, int64(maxRateUnits))
	case r.Per < time.Millisecond:
		return invalidf("rate per %v: Per must be at least 1ms", r.Per)
	case r.Burst < 0 || r.Burst > maxRateUnits:
		return invalidf("burst of %d units: Burst must be in [0, %d]", r.Burst, int64(maxRateUnits))
	}
	return nil
}

// args appends the Rate as the scripts read it: per (us), n, burst.
func (r Rate) args(to []any) []any {
	return append(to, r.Per.Microseconds(), r.N, r.burst())
}
