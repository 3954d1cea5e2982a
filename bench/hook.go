package main

import (
	"context"
	"maps"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// counter is a go-redis hook that counts round trips (one per command sent
// alone, one per pipeline or transaction) and the commands they carry.
type counter struct {
	rt   atomic.Int64
	cmds atomic.Int64
	// byPhase counts the round trips of calls made under a context that
	// withPhase marked (S3, FAIR: the acquire's and the release's own).
	byPhase [phases]atomic.Int64

	mu       sync.Mutex
	logPipe  atomic.Bool      // record every pipeline (S7)
	pipes    []pipeEvent      // when logPipe
	last     atomic.Int64     // unix ns of the last call sent (S4)
	logNames atomic.Bool      // count commands by name (capacity)
	names    map[string]int64 // when logNames: commands sent, by name
}

// pipeEvent is one pipeline sent: when, how many commands, and whether
// they are scripts (renewals) rather than, say, a new connection's
// handshake.
type pipeEvent struct {
	at     time.Time
	cmds   int
	script bool
}

var _ redis.Hook = (*counter)(nil)

func (c *counter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.rt.Add(1)
		c.cmds.Add(1)
		c.phased(ctx)
		c.last.Store(time.Now().UnixNano())
		if c.logNames.Load() {
			c.count([]redis.Cmder{cmd})
		}
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.rt.Add(1)
		c.cmds.Add(int64(len(cmds)))
		c.phased(ctx)
		now := time.Now()
		c.last.Store(now.UnixNano())
		if c.logPipe.Load() {
			c.mu.Lock()
			name := ""
			if len(cmds) > 0 {
				name = cmds[0].Name()
			}
			c.pipes = append(c.pipes, pipeEvent{at: now, cmds: len(cmds), script: name == "evalsha" || name == "eval"})
			c.mu.Unlock()
		}
		if c.logNames.Load() {
			c.count(cmds)
		}
		return next(ctx, cmds)
	}
}

// count adds cmds to the commands sent by name. A transaction (MULTI …
// EXEC) counts as its MULTI and EXEC only: the server times the queued
// commands inside EXEC, as it times a script's calls inside EVALSHA.
func (c *counter) count(cmds []redis.Cmder) {
	tx := len(cmds) > 1 && cmds[0].Name() == "multi"
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.names == nil {
		c.names = map[string]int64{}
	}
	for i, cmd := range cmds {
		if tx && i > 0 && i < len(cmds)-1 {
			continue
		}
		c.names[cmd.Name()]++
	}
}

// sentByName returns a copy of the commands counted by name so far.
func (c *counter) sentByName() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.names)
}

// snapshot returns the round trips and commands counted so far.
func (c *counter) snapshot() (rt, cmds int64) { return c.rt.Load(), c.cmds.Load() }

// lastSent returns when the last call went out.
func (c *counter) lastSent() time.Time { return time.Unix(0, c.last.Load()) }

// newClient returns a go-redis client for addr with a counter attached.
// Every implementation gets its own client with the same options.
func newClient(addr string) (*redis.Client, *counter) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c := &counter{}
	rdb.AddHook(c)
	return rdb, c
}

// callPhase names the part of a scenario's loop a call belongs to.
type callPhase int

const (
	phaseNone    callPhase = iota
	phaseAcquire           // inside an Acquire (its attempts, and anything run on its context)
	phaseRelease           // inside a Release
	phases
)

type phaseKey struct{}

// withPhase marks ctx: the round trips of calls made under it count
// toward p (counter.phaseRT). A library that runs background work on a
// context derived from the caller's (context.WithoutCancel keeps values)
// has that work counted too, as the call's own cost.
func withPhase(ctx context.Context, p callPhase) context.Context {
	return context.WithValue(ctx, phaseKey{}, p)
}

// phased counts a round trip toward ctx's phase, if it has one.
func (c *counter) phased(ctx context.Context) {
	if p, ok := ctx.Value(phaseKey{}).(callPhase); ok && p > phaseNone && p < phases {
		c.byPhase[p].Add(1)
	}
}

// phaseRT returns the round trips counted toward p so far.
func (c *counter) phaseRT(p callPhase) int64 { return c.byPhase[p].Load() }
