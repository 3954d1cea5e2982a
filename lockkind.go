package lock

// lockKind is one kind of lock, as the option table tells them apart.
type lockKind uint8

const (
	kindMutex     lockKind = iota // NewLock, WithLock
	kindReentrant                 // NewLock with WithOwner
	kindFair                      // NewLock with WithFair(true)
	kindRW                        // NewRWLock: its readers and its writer
	kindPermit                    // NewSemaphore
	kindMulti                     // NewMultiLock, WithMultiLock
	kindOnce                      // Once, OnceValue, Forget
	kindElection                  // NewElection
	kindLimiter                   // NewLimiter
	numKinds
)

// kindLabels name the kinds as errors do.
var kindLabels = [numKinds]string{
	kindMutex:     "a mutex",
	kindReentrant: "a re-entrant mutex",
	kindFair:      "a fair mutex",
	kindRW:        "a read-write lock",
	kindPermit:    "a semaphore permit",
	kindMulti:     "a multi-lock",
	kindOnce:      "Once",
	kindElection:  "an election",
	kindLimiter:   "a rate limiter",
}

// kindSet is a set of kinds.
type kindSet uint16

// kinds returns the set of ks.
func kinds(ks ...lockKind) kindSet {
	var s kindSet
	for _, k := range ks {
		s |= 1 << k
	}
	return s
}

// has reports whether k is in s.
func (s kindSet) has(k lockKind) bool { return s&(1<<k) != 0 }
