package lease

import "testing"

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
