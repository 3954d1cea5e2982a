package faulttest

import (
	"context"
	"os"
	"strconv"
	"testing"

	lock "github.com/agentlock/lock"
)

// candidate is an election's candidate as a hold: Acquire campaigns with
// the process's pid as its value, Release resigns, and its member is the
// election's name with the term as fence. Its Token is the term, which
// names the term in Redis (see pollGone).
type candidate struct{ *lock.Election }

func (c candidate) Acquire(ctx context.Context) error {
	return c.Campaign(ctx, "pid "+strconv.Itoa(os.Getpid()))
}
func (c candidate) Release(ctx context.Context) error { return c.Resign(ctx) }
func (c candidate) Token() string                     { return strconv.FormatInt(c.Term(), 10) }

var _ held = candidate{}

func electionKind(key string) holdKind {
	return holdKind{keys: []string{key}, mode: holdExclusive, env: []string{"FT_KEY=" + key, "FT_ELECTION=1"},
		lock: func(c *lock.Client) held { return candidate{c.NewElection(key)} }}
}

// TestProcess_electionLeaderKilled: a leader SIGKILLed mid-term is
// replaced once its term runs out; the history (leadership intervals and
// fenced writes, checked by porcupine) has one leader at a time and terms
// that increase.
func TestProcess_electionLeaderKilled(t *testing.T) {
	holderKilled(t, "election_leader_killed", electionKind("election-killed"))
}

// TestProcess_electionLeaderPaused: a leader SIGSTOPped for twice the
// TTL is replaced; resumed, its Lost() fires and its late write with the
// old term is refused; porcupine checks the history.
func TestProcess_electionLeaderPaused(t *testing.T) {
	holderPaused(t, "election_leader_paused", electionKind("election-paused"))
}
