package faulttest

import (
	"strconv"
	"strings"

	lock "github.com/agentlock/lock"
)

// holdKind is the kind of lock a process scenario's hold worker takes and
// the parent's contender waits for: a mutex, a semaphore's permit, a fair
// lock, or a multi-lock over several keys.
type holdKind struct {
	keys []string                // the keys held: one, or a multi-lock's members
	mode byte                    // the holds' mode in the history
	env  []string                // the hold worker's FT_ variables for it
	lock func(*lock.Client) held // the parent's contender
	semN int                     // the semaphore's n; 0 for the other kinds
}

// n is the model's bound on holders per key.
func (k holdKind) n() int { return max(k.semN, 1) }

func mutexKind(key string) holdKind {
	return holdKind{keys: []string{key}, mode: holdExclusive, env: []string{"FT_KEY=" + key},
		lock: func(c *lock.Client) held { return c.NewLock(key) }}
}

func permitKind(key string, n int) holdKind {
	return holdKind{keys: []string{key}, mode: holdPermit, semN: n,
		env:  []string{"FT_KEY=" + key, "FT_SEM_N=" + strconv.Itoa(n)},
		lock: func(c *lock.Client) held { return c.NewSemaphore(key, n).Permit() }}
}

func fairKind(key string) holdKind {
	return holdKind{keys: []string{key}, mode: holdExclusive, env: []string{"FT_KEY=" + key, "FT_FAIR=1"},
		lock: func(c *lock.Client) held { return c.NewLock(key, lock.WithFair(true)) }}
}

func multiKind(keys ...string) holdKind {
	return holdKind{keys: keys, mode: holdExclusive, env: []string{"FT_MULTI=" + strings.Join(keys, ",")},
		lock: func(c *lock.Client) held { return c.NewMultiLock(keys) }}
}

// workerHold is the hold a hold worker takes on c, chosen by its FT_
// variables (see holdKind), and the hold's mode in the history.
func workerHold(c *lock.Client, getenv func(string) string) (held, byte) {
	key := getenv("FT_KEY")
	switch {
	case getenv("FT_MULTI") != "":
		return c.NewMultiLock(strings.Split(getenv("FT_MULTI"), ",")), holdExclusive
	case getenv("FT_RW") == "read": // a read-write lock's hold (rwlock_test.go)
		return c.NewRWLock(key).ReadLock(), holdRead
	case getenv("FT_RW") == "write":
		return c.NewRWLock(key).WriteLock(), holdExclusive
	case getenv("FT_ELECTION") == "1": // a candidate (election_test.go)
		return candidate{c.NewElection(key)}, holdExclusive
	case getenv("FT_FAIR") == "1":
		return c.NewLock(key, lock.WithFair(true)), holdExclusive
	}
	if n, _ := strconv.Atoi(getenv("FT_SEM_N")); n > 0 {
		return c.NewSemaphore(key, n).Permit(), holdPermit // a permit of a semaphore of n
	}
	return c.NewLock(key), holdExclusive
}
