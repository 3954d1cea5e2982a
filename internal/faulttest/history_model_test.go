package faulttest

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// TestHistory_modelRejectsBrokenHistories proves the linearizability check
// can fail: each history below breaks one rule of lockModel and porcupine
// must call it Illegal, while its repaired twin is Ok. Times are in
// arbitrary units; two operations overlap when their intervals do.
func TestHistory_modelRejectsBrokenHistories(t *testing.T) {
	acq := func(c string, mode byte, fence, call, ret int64) histOp {
		return histOp{Op: 'A', Key: "k", Client: c, Mode: mode, Fence: fence, Call: call, Ret: ret}
	}
	rel := func(c string, call, ret int64) histOp {
		return histOp{Op: 'R', Key: "k", Client: c, Call: call, Ret: ret}
	}
	write := func(c string, fence int64, ok bool, call, ret int64) histOp {
		return histOp{Op: 'W', Key: "k", Client: c, Fence: fence, OK: ok, Call: call, Ret: ret}
	}
	x, r, p := byte(holdExclusive), byte(holdRead), byte(holdPermit)
	for _, tc := range []struct {
		name string
		n    int
		ops  []histOp
		want porcupine.CheckResult
	}{
		{"handoff", 1, []histOp{
			acq("a", x, 1, 0, 1), write("a", 1, true, 2, 3), rel("a", 4, 5),
			acq("b", x, 2, 3, 6), write("b", 2, true, 7, 8), rel("b", 9, 10),
		}, porcupine.Ok},
		{"twoHoldersOverlap", 1, []histOp{
			acq("a", x, 1, 0, 1), acq("b", x, 2, 2, 3), rel("a", 4, 5), rel("b", 6, 7),
		}, porcupine.Illegal},
		{"fenceNotIncreasing", 1, []histOp{
			acq("a", x, 2, 0, 1), rel("a", 2, 3), acq("b", x, 2, 4, 5), rel("b", 6, 7),
		}, porcupine.Illegal},
		// a paused holder's hold ends somewhere in [stop, Lost()]; the new
		// holder's write lands first, the late one is rejected: Ok.
		{"acquiresOutOfFenceOrder", 1, []histOp{
			acq("a", x, 3, 0, 1), rel("a", 2, 3), acq("b", x, 2, 4, 5), rel("b", 6, 7),
		}, porcupine.Illegal},
		{"staleWriteRejected", 1, []histOp{
			acq("a", x, 1, 0, 1), rel("a", 2, 20),
			acq("b", x, 2, 3, 4), write("b", 2, true, 5, 6),
			write("a", 1, false, 10, 11), rel("b", 21, 22),
		}, porcupine.Ok},
		{"staleWriteAccepted", 1, []histOp{
			acq("a", x, 1, 0, 1), rel("a", 2, 20),
			acq("b", x, 2, 3, 4),
			write("a", 1, true, 10, 11), write("b", 2, true, 12, 13), rel("b", 21, 22),
		}, porcupine.Illegal},
		// a lost holder nobody replaced may still write: its fence is the
		// highest issued, so the write is not stale.
		{"lostHolderUnreplacedWrites", 1, []histOp{
			acq("a", x, 1, 0, 1), rel("a", 2, 3), write("a", 1, true, 4, 5),
		}, porcupine.Ok},
		{"storeAcceptsOldFence", 1, []histOp{
			acq("a", x, 1, 0, 1), write("a", 1, true, 2, 3), rel("a", 4, 5),
			acq("b", x, 2, 6, 7), write("b", 2, true, 8, 9), write("b", 2, true, 10, 11), rel("b", 12, 13),
		}, porcupine.Illegal},
		{"readersTogether", 1, []histOp{
			acq("a", r, 0, 0, 1), acq("b", r, 0, 0, 1), rel("a", 2, 3), rel("b", 2, 3),
			acq("w", x, 1, 4, 5), rel("w", 6, 7), acq("c", r, 1, 8, 9), rel("c", 10, 11),
		}, porcupine.Ok},
		{"readerBesideWriter", 1, []histOp{
			acq("w", x, 1, 0, 1), acq("a", r, 1, 2, 3), rel("a", 4, 5), rel("w", 6, 7),
		}, porcupine.Illegal},
		{"readerFenceBehindWriter", 1, []histOp{
			acq("w", x, 3, 0, 1), rel("w", 2, 3), acq("a", r, 2, 4, 5), rel("a", 6, 7),
		}, porcupine.Illegal},
		{"nPermits", 2, []histOp{
			acq("a", p, 1, 0, 1), acq("b", p, 2, 0, 1), rel("a", 2, 3), acq("c", p, 3, 2, 4), rel("b", 5, 6), rel("c", 5, 6),
		}, porcupine.Ok},
		{"nPlusOnePermits", 2, []histOp{
			acq("a", p, 1, 0, 1), acq("b", p, 2, 0, 1), acq("c", p, 3, 2, 3), rel("a", 4, 5), rel("b", 4, 5), rel("c", 4, 5),
		}, porcupine.Illegal},
		{"releaseWithoutHold", 1, []histOp{
			rel("a", 0, 1),
		}, porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := linearizable(tc.ops, tc.n)
			if got != tc.want {
				t.Errorf("porcupine = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestHistory_fileRoundTrip: a history line read back is the operation
// written, and widenEnd gives a killed holder's hold its open end.
func TestHistory_fileRoundTrip(t *testing.T) {
	h := newHistory(t)
	env := h.workerEnv()
	path := env[len(histEnv)+1:]
	a := histOp{Op: 'A', Key: "k", Client: "w1", Mode: holdExclusive, Fence: 7, Call: 10, Ret: 20}
	w := histOp{Op: 'W', Key: "k", Client: "w1", Fence: 7, OK: true, Call: 30, Ret: 31}
	if err := appendHistory(path, a, w); err != nil {
		t.Fatal(err)
	}
	ops := h.all(t)
	if len(ops) != 2 || ops[0] != a || ops[1] != w {
		t.Fatalf("read back %v, want %v %v", ops, a, w)
	}
	ops = widenEnd(ops, "k", "w1", 40, 50)
	if want := (histOp{Op: 'R', Key: "k", Client: "w1", Call: 40, Ret: 50}); len(ops) != 3 || ops[2] != want {
		t.Fatalf("widenEnd added %v, want %v", ops[len(ops)-1], want)
	}
}
