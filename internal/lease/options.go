package lease

import (
	"crypto/rand"
	"strings"
	"time"

	"github.com/google/uuid"
)

// MinTTL is the shortest lease every kind accepts (lock.MinTTL says how it
// was chosen).
const MinTTL = 100 * time.Millisecond

// TTLError is the error for a lease shorter than MinTTL.
func TTLError(ttl time.Duration) error {
	return Invalidf("ttl %v: must be at least %v (MinTTL)", ttl, MinTTL)
}

// CheckOptions reports the first out-of-range value among the options
// every kind shares, wrapping ErrInvalid.
func CheckOptions(ttl, wait, backoffMin, backoffMax time.Duration, prefix string) error {
	switch {
	case ttl < MinTTL:
		return TTLError(ttl)
	case wait < 0:
		return Invalidf("wait timeout %v: must not be negative", wait)
	case backoffMin <= 0 || backoffMax <= 0:
		return Invalidf("backoff %v..%v: both bounds must be positive", backoffMin, backoffMax)
	case backoffMin > backoffMax:
		return Invalidf("backoff %v..%v: min exceeds max", backoffMin, backoffMax)
	case strings.ContainsAny(prefix, "{}"):
		return Invalidf("prefix %q: must not contain '{' or '}' (it would move the hash tag)", prefix)
	}
	return nil
}

// NewToken returns a random UUID v4 from crypto/rand, the token of a hold.
func NewToken() (string, error) {
	// Filled straight from crypto/rand: uuid.NewRandom reads through an
	// io.Reader and costs one more allocation per acquisition.
	var u uuid.UUID
	if _, err := rand.Read(u[:]); err != nil {
		return "", err
	}
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return u.String(), nil
}

// With returns cfg with opts applied in order; nil options are skipped.
func With[C any, O ~func(*C)](cfg C, opts []O) C {
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	return cfg
}
