package lease

import (
	"testing"
	"time"
)

// TestDeliver: each payload wakes the waiters it names, and only those.
func TestDeliver(t *testing.T) {
	cases := []struct {
		payload string
		want    []bool // woken, by waiter: tokens a, b, c in arrival order
	}{
		{MsgReleased, []bool{true, false, false}},
		{"something newer", []bool{true, false, false}},
		{MsgAll, []bool{true, true, true}},
		{MsgTo + "b", []bool{false, true, false}},
		{MsgTo + "nobody", []bool{false, false, false}},
		{MsgGive + "c:12", []bool{false, false, true}},
		{MsgGive + "nobody:12", []bool{false, false, false}},
	}
	for _, tc := range cases {
		t.Run(tc.payload, func(t *testing.T) {
			n := &Notifier{chans: map[string]*channelState{}}
			cs := &channelState{name: "ch"}
			n.chans["ch"] = cs
			for _, tok := range []string{"a", "b", "c"} {
				cs.waiters = append(cs.waiters, &Waiter{n: n, cs: cs, ch: make(chan struct{}, 1), token: tok})
			}
			n.deliver("other channel", MsgAll) // no waiters there: nothing
			n.deliver("ch", tc.payload)
			for i, w := range cs.waiters {
				woken := len(w.ch) == 1
				if woken != tc.want[i] || w.owed != tc.want[i] {
					t.Errorf("waiter %s: woken %v (owed %v), want %v", w.token, woken, w.owed, tc.want[i])
				}
			}
		})
	}
}

// TestDeliver_give: a give message hands the hold to its waiter when that
// waiter is between attempts and its last attempt is recent, counting the
// lease from that attempt; otherwise it only wakes it.
func TestDeliver_give(t *testing.T) {
	cases := []struct {
		name   string
		state  int
		ttl    time.Duration
		sent   time.Duration // ago; 0: never
		gifted bool
	}{
		{"idle, recent attempt", waiterIdle, time.Minute, time.Millisecond, true},
		{"attempting", waiterAttempting, time.Minute, time.Millisecond, false},
		{"not a queued kind", waiterIdle, 0, time.Millisecond, false},
		{"never attempted", waiterIdle, time.Minute, 0, false},
		{"attempt older than ttl/2", waiterIdle, time.Second, time.Second, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := &Notifier{chans: map[string]*channelState{}}
			cs := &channelState{name: "ch"}
			n.chans["ch"] = cs
			w := &Waiter{n: n, cs: cs, ch: make(chan struct{}, 1), token: "a", state: tc.state, ttl: tc.ttl}
			if tc.sent > 0 {
				w.sent = time.Now().Add(-tc.sent)
			}
			cs.waiters = []*Waiter{w}
			n.deliver("ch", MsgGive+"a:1700000000000042")
			if len(w.ch) != 1 {
				t.Fatal("waiter not woken")
			}
			if got := w.state == waiterGifted; got != tc.gifted {
				t.Fatalf("gifted = %v, want %v", got, tc.gifted)
			}
			if tc.gifted && (w.gift.Fence != 1700000000000042 || !w.gift.Sent.Equal(w.sent) || w.gift.Retry) {
				t.Fatalf("gift = %+v, want fence 1700000000000042 sent at the last attempt", w.gift)
			}
		})
	}
}
