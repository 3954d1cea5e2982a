package lease

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestNotifier_listen_subscribeRetried: a hold listening on the Client's
// force channel, whose first SUBSCRIBE found no source, gets the channel
// subscribed by the background retry with no waiter on it, and a
// force-release message then reaches the hold.
func TestNotifier_listen_subscribeRetried(t *testing.T) {
	e, rdb, asked := engineFirstSubscribeFails(t)
	n := &e.Notifier
	const channel = "lock:force:c1"
	pol := &Policy{Engine: e, Pkg: "lock", Inbox: channel, TTL: time.Minute,
		Margin: func(time.Duration) time.Duration { return time.Millisecond },
		Lost:   func(key string, r Reason, err error) error { return errors.New(r.String()) }}
	hd := &Handle{pol: pol}
	hd.Keys.User = "k"
	h := newHold(hd, "t1", 1, time.Now())

	e.add(h, nil)
	n.listen(channel)
	defer h.unlisten()
	for deadline := time.Now().Add(10 * time.Second); !n.Listening(channel); {
		if time.Now().After(deadline) {
			t.Fatalf("force channel not subscribed 10s after the hold listened: sources asked %d times; want the subscribe tried again while a hold listens",
				asked.Load())
		}
		time.Sleep(5 * time.Millisecond) // polls a state; opens no window
	}
	if err := rdb.Publish(context.Background(), channel, MsgForce+"t1").Err(); err != nil {
		t.Fatalf("PUBLISH: %v", err)
	}
	select {
	case <-h.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("hold not lost 10s after a force-release message on its confirmed channel")
	}
	if got := h.LostErr(); got == nil {
		t.Fatal("LostErr() = nil after the force-release message")
	}
}

// forceEngine returns an Engine whose holds, made by holdOn, listen on
// channel for force-releases. No source: the channel is never subscribed,
// and a test hands the Notifier its messages (deliver).
func forceEngine(t testing.TB, channel string) (*Engine, *Policy) {
	t.Helper()
	e := new(Engine)
	e.Init(func(string) []Source { return nil }, nil)
	t.Cleanup(func() { e.Close(nil) })
	pol := &Policy{Engine: e, Pkg: "lock", Inbox: channel, TTL: time.Minute,
		Margin: func(time.Duration) time.Duration { return time.Millisecond },
		Lost:   func(key string, r Reason, err error) error { return errors.New(r.String()) }}
	return e, pol
}

// holdOn installs a hold of token on a handle of its own under pol, as an
// acquire that got the key does.
func holdOn(t *testing.T, pol *Policy, token string) *Hold {
	t.Helper()
	hd := &Handle{pol: pol}
	hd.Keys.User = "k:" + token
	h, err := hd.install(token, 1, time.Now(), false)
	if err != nil {
		t.Fatalf("install(%s): %v", token, err)
	}
	return h
}

// listeners is how many holds n counts on channel.
func listeners(n *Notifier, channel string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if cs := n.chans[channel]; cs != nil {
		return cs.holds
	}
	return 0
}

// TestHold_lostWhileInstalled_countStaysRight: a hold lost the moment it
// enters renewal (a renewal sent at once finds the key gone, say), before
// its install returns, is counted off its force channel exactly once: the
// channel ends with no hold counted, and can go idle.
func TestHold_lostWhileInstalled_countStaysRight(t *testing.T) {
	const channel = "lock:force"
	e, pol := forceEngine(t, channel)
	e.installed = func(h *Hold) { e.lose(h, Gone, false) }
	x := holdOn(t, pol, "x")
	if x.Active() {
		t.Fatal("x still active after its loss")
	}
	if got := listeners(&e.Notifier, channel); got != 0 {
		t.Fatalf("holds counted on the force channel after the only hold was lost = %d, want 0 (the channel would never go idle)", got)
	}
}

// TestHold_lostWhileInstalled_othersStillHear: a hold lost before its
// install returns takes no other hold's place on the force channel: a
// force-release message for another hold, held all along, arriving right
// after that loss, reaches it.
func TestHold_lostWhileInstalled_othersStillHear(t *testing.T) {
	const channel = "lock:force"
	e, pol := forceEngine(t, channel)
	y := holdOn(t, pol, "y")
	e.installed = func(h *Hold) {
		if h.token == "x" {
			e.lose(h, Gone, false)
			e.Notifier.deliver(channel, MsgForce+"y")
		}
	}
	x := holdOn(t, pol, "x")
	if x.Active() {
		t.Fatal("x still active after its loss")
	}
	if y.LostErr() == nil {
		t.Fatalf("y, held and counted on the force channel, not lost after a force message for it (holds counted now: %d)",
			listeners(&e.Notifier, channel))
	}
	if got := listeners(&e.Notifier, channel); got != 0 {
		t.Fatalf("holds counted on the force channel after both holds ended = %d, want 0", got)
	}
}

// chunkGroup renews every chunk at once but a chunk of one hold, which it
// holds back until release closes, telling out which hold that is.
type chunkGroup struct {
	release chan struct{}
	out     chan *Hold
}

func (g *chunkGroup) Renew(_ context.Context, hs []*Hold, _ []time.Duration, out []Outcome) {
	if len(hs) == 1 {
		g.out <- hs[0]
		<-g.release
	}
	for i := range out {
		out[i] = Outcome{Status: Confirmed}
	}
}

// TestEngine_holdOf_findsHoldsOfAFlightPartlyLanded: one tick renews
// BatchSize+1 holds in two chunks; the first is applied (its holds back in
// the heap), the second held back. A force message reaches a hold of
// either: the one still out through the tick's flight, which stays
// registered until its last chunk is applied.
func TestEngine_holdOf_findsHoldsOfAFlightPartlyLanded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const channel = "lock:force"
		e, pol := forceEngine(t, channel)
		g := &chunkGroup{release: make(chan struct{}), out: make(chan *Hold, 1)}
		pol.Watchdog, pol.TTL = true, 3*time.Second
		pol.Group = func(context.Context, *Hold) Group { return g }
		hs := make([]*Hold, BatchSize+1)
		for i := range hs {
			hs[i] = holdOn(t, pol, fmt.Sprint("t", i))
		}
		out := <-g.out // the renewal at TTL/3: one chunk out, the other applied
		synctest.Wait()
		landed := hs[0]
		if landed == out {
			landed = hs[1]
		}
		for _, h := range []*Hold{landed, out} {
			e.Notifier.deliver(channel, MsgForce+h.token)
			if h.LostErr() == nil {
				t.Errorf("hold %s (renewal out: %v) not lost after a force message for it", h.token, h == out)
			}
		}
		close(g.release)
		e.Close(nil)
	})
}

// TestEngine_holdOf_matchesTheChannel: holds of one Engine listen on two
// force channels (locks of two prefixes); a force message names a token on
// one channel, and only a hold listening there is lost by it.
func TestEngine_holdOf_matchesTheChannel(t *testing.T) {
	e, polA := forceEngine(t, "a:force")
	polB := *polA
	polB.Inbox = "b:force"
	x, y := holdOn(t, polA, "x"), holdOn(t, &polB, "y")
	e.Notifier.deliver("b:force", MsgForce+"x") // y listens there: the Engine looks
	if x.LostErr() != nil {
		t.Fatal("x, listening on a:force, lost by a force message on b:force")
	}
	e.Notifier.deliver("a:force", MsgForce+"x")
	if x.LostErr() == nil {
		t.Fatal("x not lost by a force message for it on its own channel")
	}
	if y.LostErr() != nil {
		t.Fatal("y lost by a force message for another token")
	}
}

// releaseKind is a kind whose Release answers o, after running during (a
// loss reported while the Release is out). Nothing else is used.
type releaseKind struct {
	o      Outcome
	during func()
}

func (releaseKind) Token() (string, error)              { return "", nil }
func (releaseKind) Try(context.Context, string) Attempt { return Attempt{} }
func (releaseKind) Undo(context.Context, string)        {}
func (releaseKind) CheckTTL(time.Duration) error        { return nil }
func (k releaseKind) Release(context.Context, *Hold, bool) Outcome {
	if k.during != nil {
		k.during()
	}
	return k.o
}
func (releaseKind) Extend(context.Context, *Hold, time.Duration) (Outcome, <-chan struct{}) {
	return Outcome{}, nil
}

// TestHold_endsOnceOnItsForceChannel: however a hold ends, released or
// lost or both, in either order and more than once, it is counted off its
// force channel once: another hold held meanwhile stays counted, and
// hears its force message.
func TestHold_endsOnceOnItsForceChannel(t *testing.T) {
	ctx := context.Background()
	confirmed, gone, failed := releaseKind{o: Outcome{Status: Confirmed}}, releaseKind{o: Outcome{Status: Gone}},
		releaseKind{o: Outcome{Status: Failed, Err: errors.New("down")}}
	for name, end := range map[string]func(e *Engine, x *Hold){
		"released":              func(e *Engine, x *Hold) { _ = x.hd.Release(ctx, confirmed) },
		"release finds it gone": func(e *Engine, x *Hold) { _ = x.hd.Release(ctx, gone) },
		"release fails":         func(e *Engine, x *Hold) { _ = x.hd.Release(ctx, failed) },
		"released twice": func(e *Engine, x *Hold) {
			_ = x.hd.Release(ctx, confirmed)
			_ = x.hd.Release(ctx, gone)
		},
		"lost, then released": func(e *Engine, x *Hold) {
			e.forceLost(x)
			_ = x.hd.Release(ctx, gone)
		},
		"lost while its release is out": func(e *Engine, x *Hold) {
			_ = x.hd.Release(ctx, releaseKind{o: Outcome{Status: Gone}, during: func() { e.forceLost(x) }})
		},
		"released, then lost": func(e *Engine, x *Hold) {
			_ = x.hd.Release(ctx, confirmed)
			x.markLost(LossExpired, nil)
		},
		"lost twice": func(e *Engine, x *Hold) {
			e.lose(x, Gone, false)
			e.forceLost(x)
		},
	} {
		t.Run(name, func(t *testing.T) {
			const channel = "lock:force"
			e, pol := forceEngine(t, channel)
			x, y := holdOn(t, pol, "x"), holdOn(t, pol, "y")
			end(e, x)
			if x.Active() {
				t.Fatal("x still active")
			}
			if got := listeners(&e.Notifier, channel); got != 1 {
				t.Fatalf("holds counted on the force channel with y alone held = %d, want 1", got)
			}
			e.Notifier.deliver(channel, MsgForce+"y")
			if y.LostErr() == nil {
				t.Fatal("y not lost by a force message for it")
			}
			if got := listeners(&e.Notifier, channel); got != 0 {
				t.Fatalf("holds counted on the force channel once both ended = %d, want 0", got)
			}
		})
	}
}

// BenchmarkEngine_holdOf is the cost of a force message to a Client that
// holds n locks, none of them the one it names (a scan of every hold):
// what each hold a force-release removed costs every Client of the prefix.
func BenchmarkEngine_holdOf(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			e, pol := forceEngine(b, "bench:force")
			for i := range n {
				hd := &Handle{pol: pol}
				hd.Keys.User = "k"
				if _, err := hd.install("token-"+strconv.Itoa(i), 1, time.Now(), false); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				if e.holdOf("someone-else", "bench:force") != nil {
					b.Fatal("found a hold for a token no hold has")
				}
			}
		})
	}
}

// confirmGroup is a renewal batch that confirms every hold; each call
// first takes a token from gate, when gate is not nil.
type confirmGroup struct {
	gate  chan struct{}
	mu    sync.Mutex
	calls int
}

func (g *confirmGroup) Renew(_ context.Context, _ []*Hold, _ []time.Duration, out []Outcome) {
	if g.gate != nil {
		<-g.gate
	}
	g.mu.Lock()
	g.calls++
	g.mu.Unlock()
	for i := range out {
		out[i] = Outcome{Status: Confirmed}
	}
}

func (g *confirmGroup) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}

// channelAt makes e's state of channel, its subscription confirmed at
// heard (0: not confirmed).
func channelAt(e *Engine, channel string, heard int64) *channelState {
	n := &e.Notifier
	n.mu.Lock()
	defer n.mu.Unlock()
	cs := &channelState{name: channel}
	cs.heard.Store(heard)
	n.chans[channel] = cs
	return cs
}

// owes reports whether h owes a check, and whether a force message named
// it before its install.
func owes(e *Engine, h *Hold) (owed, forced bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := h.x.Load(); x != nil {
		return x.owed, x.forced
	}
	return false, false
}

// TestEngine_screen: as a hold enters renewal, a force message it may have
// missed is found: one heard after its acquire was sent marks it forced
// (one heard before is an earlier hold's of the token); a force channel
// confirmed after the acquire was sent, or a message forgotten since it
// was, makes it owe a check, due at once; a channel confirmed before, and
// nothing remembered, leave it alone, its first renewal at TTL/3. A
// channel not confirmed yet leaves it to the confirmation, which makes it
// owe a check then.
func TestEngine_screen(t *testing.T) {
	const channel = "lock:force"
	sent := time.Now()
	s := mono(sent)
	for _, tc := range []struct {
		name             string
		heard            int64 // the channel's confirmation; 0: none yet
		message, forgot  int64 // a message for the hold's token heard then (0: none); the last forgotten
		wantOwed, forced bool
	}{
		{"channel confirmed before the acquire", s - 1, 0, math.MinInt64, false, false},
		{"channel confirmed after the acquire was sent", s + 1, 0, math.MinInt64, true, false},
		{"channel not confirmed yet", 0, 0, math.MinInt64, false, false},
		{"message heard after the acquire was sent", s - 1, s + 1, math.MinInt64, false, true},
		{"message heard before the acquire was sent", s - 1, s - 1, math.MinInt64, false, false},
		{"message forgotten after the acquire was sent", s - 1, 0, s + 1, true, false},
		{"message forgotten before the acquire was sent", s - 1, 0, s - 1, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, pol := forceEngine(t, channel)
			// Its renewals wait until the test has looked: a check's
			// answer clears the debt the test looks for.
			grp := &confirmGroup{gate: make(chan struct{})}
			t.Cleanup(func() { close(grp.gate) })
			pol.Watchdog, pol.Group = true, func(context.Context, *Hold) Group { return grp }
			channelAt(e, channel, tc.heard)
			e.mu.Lock()
			e.forgot, e.forcedLast = tc.forgot, monoNow()
			if tc.message != 0 {
				e.forced = map[string]int64{"t": tc.message}
			}
			e.mu.Unlock()
			hd := &Handle{pol: pol}
			hd.Keys.User = "k"
			h, err := hd.install("t", 1, sent, false)
			if err != nil {
				t.Fatalf("install: %v", err)
			}
			owed, forced := owes(e, h)
			if forced != tc.forced {
				t.Fatalf("forced = %v, want %v", forced, tc.forced)
			}
			e.mu.Lock()
			next, want := h.next, later(s, pol.TTL/3)
			e.mu.Unlock()
			switch {
			case owed != tc.wantOwed:
				t.Fatalf("owes a check = %v, want %v", owed, tc.wantOwed)
			case owed && next > monoNow():
				t.Fatalf("a hold that owes a check is due in %v, want at once", between(monoNow(), next))
			case !owed && !forced && next != want:
				t.Fatalf("next renewal at %v after the acquire, want TTL/3", between(s, next))
			}
			hd.settle(h)
			if lost := h.LostErr() != nil; lost != tc.forced {
				t.Fatalf("lost after settle = %v (%v), want %v", lost, h.LostErr(), tc.forced)
			}
			if tc.heard == 0 {
				e.Notifier.confirmed(channel)
				if owed, _ := owes(e, h); !owed {
					t.Fatal("no check owed once the channel was confirmed after the hold was installed")
				}
			}
		})
	}
}

// TestEngine_heardAll_renewalInFlight: a hold whose renewal is out when its
// force channel's subscription is confirmed owes a check that the renewal
// out does not settle (it was sent before): once it is answered, another
// renewal goes at once, and that one settles it.
func TestEngine_heardAll_renewalInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const channel = "lock:force"
		e, pol := forceEngine(t, channel)
		g := &confirmGroup{gate: make(chan struct{})}
		pol.Watchdog, pol.TTL, pol.Group = true, 3*time.Second, func(context.Context, *Hold) Group { return g }
		channelAt(e, channel, 0)
		hd := &Handle{pol: pol}
		hd.Keys.User = "k"
		h, err := hd.install("t", 1, time.Now(), false)
		if err != nil {
			t.Fatalf("install: %v", err)
		}
		time.Sleep(time.Second) // TTL/3: the first renewal goes out and waits at the gate
		synctest.Wait()
		e.Notifier.confirmed(channel)
		g.gate <- struct{}{} // the first renewal is answered
		synctest.Wait()
		if got := g.count(); got != 1 {
			t.Fatalf("renewals answered = %d, want 1", got)
		}
		if owed, _ := owes(e, h); !owed {
			t.Fatal("check settled by a renewal sent before the channel was confirmed")
		}
		g.gate <- struct{}{} // the check, sent at once
		synctest.Wait()
		if owed, _ := owes(e, h); owed || g.count() != 2 {
			t.Fatalf("after %d renewals the hold owes a check = %v, want 2 and false", g.count(), owed)
		}
		close(g.gate)
		e.Close(nil)
	})
}
