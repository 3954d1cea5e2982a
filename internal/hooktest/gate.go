// Package hooktest holds go-redis hooks that tests use to open a window:
// a Gate holds a call, a pipeline or a dial, before it is sent or after its
// reply came back, until the test lets it go. Only tests import it.
package hooktest

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Traffic says which of a client's traffic a Gate looks at.
type Traffic uint8

// The traffic a Gate can hold.
const (
	Calls     Traffic = 1 << iota // commands sent alone
	Pipelines                     // pipelines, the coalescer's and renewals' included
	Dials                         // new connections
)

// Config says what a Gate holds.
type Config struct {
	// On is the traffic held; zero means Calls|Pipelines.
	On Traffic
	// After holds a call's reply once Redis ran it, rather than the call
	// before it is sent. Dials are always held before.
	After bool
	// Match picks the commands that count; nil counts every one. A
	// pipeline counts when one of its commands does. Dials always count.
	Match func(redis.Cmder) bool
	// Nth holds only the Nth counted call after Arm (1 the first) and
	// disarms the gate; zero holds every counted call while armed.
	Nth int
	// Armed arms the gate from the start.
	Armed bool
}

// Gate is a go-redis hook that holds the calls its Config picks while it
// is armed, until Release. Held reports the first hold; Waiting and Holds
// count them.
type Gate struct {
	cfg Config

	mu       sync.Mutex
	armed    bool
	seen     int           // counted calls since Arm
	held     chan struct{} // closed at the first hold since Arm
	heldDone bool
	open     chan struct{} // closed by Release
	released bool
	waiting  int // calls held now
	holds    int // calls held in all
	matched  int // calls its Config picks, held or not
}

// New returns a Gate for cfg; it is released at t's cleanup, so that a
// failing test leaves no call held. Add it with rdb.AddHook.
func New(t testing.TB, cfg Config) *Gate {
	if cfg.On == 0 {
		cfg.On = Calls | Pipelines
	}
	g := &Gate{cfg: cfg, armed: cfg.Armed, held: make(chan struct{}), open: make(chan struct{})}
	t.Cleanup(g.Release)
	return g
}

// Arm makes the gate hold the calls it picks from now on. After a
// Release, it shuts the gate again and Held starts over.
func (g *Gate) Arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.seen = true, 0
	if g.released {
		g.open, g.released = make(chan struct{}), false
		g.held, g.heldDone = make(chan struct{}), false
	}
}

// Disarm lets later calls pass; calls held already stay held.
func (g *Gate) Disarm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = false
}

// Release lets every held call through, and every later one until the
// next Arm. It may be called more than once.
func (g *Gate) Release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = false
	if !g.released {
		g.released = true
		close(g.open)
	}
}

// Held is closed once the gate holds a call (the first since Arm).
func (g *Gate) Held() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

// Waiting is the number of calls held now.
func (g *Gate) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

// Holds is the number of calls held so far.
func (g *Gate) Holds() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.holds
}

// Matched is the number of calls the gate's Config picks (traffic and
// Match) seen so far, armed or not, held or not.
func (g *Gate) Matched() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.matched
}

// take reports whether a call of traffic on carrying cmds is to be held,
// and returns the channel that lets it go.
func (g *Gate) take(on Traffic, cmds []redis.Cmder) (chan struct{}, bool) {
	if g.cfg.On&on == 0 || (on != Dials && !g.matches(cmds)) {
		return nil, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.matched++
	if !g.armed {
		return nil, false
	}
	g.seen++
	if g.cfg.Nth > 0 {
		if g.seen != g.cfg.Nth {
			return nil, false
		}
		g.armed = false
	}
	g.waiting++
	g.holds++
	if !g.heldDone {
		g.heldDone = true
		close(g.held)
	}
	return g.open, true
}

func (g *Gate) matches(cmds []redis.Cmder) bool {
	if g.cfg.Match == nil {
		return true
	}
	for _, c := range cmds {
		if g.cfg.Match(c) {
			return true
		}
	}
	return false
}

// wait holds the caller until open closes.
func (g *Gate) wait(open chan struct{}) {
	<-open
	g.mu.Lock()
	g.waiting--
	g.mu.Unlock()
}

// around runs send, holding it before or after as the Config says when
// the gate takes the call.
func (g *Gate) around(on Traffic, cmds []redis.Cmder, send func() error) error {
	if g.cfg.After {
		err := send()
		if open, ok := g.take(on, cmds); ok {
			g.wait(open)
		}
		return err
	}
	if open, ok := g.take(on, cmds); ok {
		g.wait(open)
	}
	return send()
}

// DialHook holds new connections when the gate looks at Dials.
func (g *Gate) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if open, ok := g.take(Dials, nil); ok {
			g.wait(open)
		}
		return next(ctx, network, addr)
	}
}

// ProcessHook holds commands sent alone when the gate looks at Calls.
func (g *Gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return g.around(Calls, []redis.Cmder{cmd}, func() error { return next(ctx, cmd) })
	}
}

// ProcessPipelineHook holds pipelines when the gate looks at Pipelines.
func (g *Gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return g.around(Pipelines, cmds, func() error { return next(ctx, cmds) })
	}
}
