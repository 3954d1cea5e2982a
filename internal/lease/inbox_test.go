package lease

import (
	"strings"
	"testing"
)

// TestNotifier_inbox_routesToKeyWaiters: a message on a Client's inbox
// wakes the waiter of the key's channel that it names, and no other; the
// inbox stays busy (subscribed) while the key's channel has waiters, and
// its name is the key's channel, ':' and the Client's id, letters and
// digits.
func TestNotifier_inbox_routesToKeyWaiters(t *testing.T) {
	var e Engine
	e.Init(nil, nil)
	defer e.Close(nil)
	n := &e.Notifier
	const channel = "lock:{k}:notify"
	id := n.ID()
	if id == "" || strings.Trim(id, "0123456789abcdefghijklmnopqrstuvwxyz") != "" {
		t.Fatalf("ID() = %q, want letters and digits", id)
	}
	if got, want := n.Inbox(channel), channel+":"+id; got != want {
		t.Fatalf("Inbox() = %q, want %q", got, want)
	}

	n.mu.Lock()
	cs := &channelState{name: channel}
	n.chans[channel] = cs
	a := &Waiter{n: n, cs: cs, ch: make(chan struct{}, 1), token: "a"}
	b := &Waiter{n: n, cs: cs, ch: make(chan struct{}, 1), token: "b"}
	cs.waiters = []*Waiter{a, b}
	in := n.inboxOf(cs)
	busy := in.busy()
	n.mu.Unlock()
	if in.name != n.Inbox(channel) || !busy {
		t.Fatalf("inbox %q busy %v, want %q busy while the key has waiters", in.name, busy, n.Inbox(channel))
	}

	n.deliver(n.Inbox(channel), MsgTo+"b")
	select {
	case <-a.ch:
		t.Fatal("the waiter the message does not name was woken")
	default:
	}
	select {
	case <-b.ch:
	default:
		t.Fatal("the waiter the inbox's message names was not woken")
	}

	n.confirmed(n.Inbox(channel))
	n.mu.Lock()
	defer n.mu.Unlock()
	if !in.ready || cs.listening() {
		t.Fatalf("after the inbox's confirmation: inbox ready %v, key listening %v; want true, false (the key's channel is not confirmed)", in.ready, cs.listening())
	}
	if len(a.ch) != 1 {
		t.Fatal("the inbox's confirmation did not wake the key's waiters")
	}
	cs.waiters = nil
	if in.busy() {
		t.Fatal("inbox busy with no waiter on its key")
	}
}
