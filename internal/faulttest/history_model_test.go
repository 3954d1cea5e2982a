package faulttest

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestHistory_modelRejectsBrokenHistories proves the linearizability check
// can fail: each history below breaks one rule of lockModel and porcupine
// must call it Illegal, while its repaired twin is Ok, whether the history
// is checked whole or cut at every quiet point (splitQuiet). Times are in
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
		// a reader queued while the writer held, granted after its release:
		// with a cut after the writer's write, the reader's acquire (in
		// flight, at the writer's fence) belongs after the cut.
		{"readerWaitsOutWriter", 1, []histOp{
			acq("w", x, 1, 0, 10), write("w", 1, true, 20, 30), acq("r", r, 1, 25, 120),
			rel("w", 100, 110), rel("r", 130, 140),
		}, porcupine.Ok},
		{"readerInDuringWriter", 1, []histOp{
			acq("w", x, 1, 0, 10), write("w", 1, true, 20, 30), acq("r", r, 1, 25, 60),
			rel("w", 100, 110), rel("r", 130, 140),
		}, porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := linearizable(tc.ops, tc.n)
			if got != tc.want {
				t.Errorf("porcupine = %s, want %s", got, tc.want)
			}
			// The same verdict with the history cut at every quiet point.
			m := lockModel(tc.n, tc.ops)
			m.Partition = func(h []porcupine.Operation) [][]porcupine.Operation { return splitQuiet(h, 1) }
			if got := porcupine.CheckOperationsTimeout(m, porcupineOps(tc.ops), time.Minute); got != tc.want {
				t.Errorf("porcupine cut at every quiet point = %s, want %s", got, tc.want)
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

// TestHistory_splitKeepsVerdicts: a long mutex history, waiters' acquires
// in flight across several holds, is cut into many pieces by splitQuiet;
// porcupine finds it Ok, and each break below, placed far from the first
// piece, Illegal, as it does with one piece per key.
func TestHistory_splitKeepsVerdicts(t *testing.T) {
	const holds = 400
	long := func() []histOp {
		var ops []histOp
		for i := int64(1); i <= holds; i++ {
			c := "c" + strconv.Itoa(int(i%5))
			ops = append(ops,
				histOp{Op: 'A', Key: "k", Client: c, Mode: holdExclusive, Fence: i, Call: 10*i - 25, Ret: 10*i + 2},
				histOp{Op: 'W', Key: "k", Client: c, Fence: i, OK: true, Call: 10*i + 3, Ret: 10*i + 4},
				histOp{Op: 'R', Key: "k", Client: c, Call: 10*i + 5, Ret: 10*i + 9})
		}
		return ops
	}
	// at is the operation of hold (counted from 1): its acquire, write or release.
	at := func(ops []histOp, hold int, op byte) *histOp {
		return &ops[3*(hold-1)+strings.IndexByte("AWR", op)]
	}
	for _, tc := range []struct {
		name string
		edit func(ops []histOp) []histOp
		want porcupine.CheckResult
	}{
		{"intact", func(ops []histOp) []histOp { return ops }, porcupine.Ok},
		{"fenceReused", func(ops []histOp) []histOp {
			at(ops, 300, 'A').Fence = 30
			at(ops, 300, 'W').Fence = 30
			return ops
		}, porcupine.Illegal},
		{"holdsOverlap", func(ops []histOp) []histOp {
			r := at(ops, 250, 'R')
			r.Call, r.Ret = 10*251+3, 10*251+4 // after the next hold began
			return ops
		}, porcupine.Illegal},
		{"oldFenceAccepted", func(ops []histOp) []histOp {
			return append(ops, histOp{Op: 'W', Key: "k", Client: "late", Fence: 7, OK: true, Call: 10*350 + 6, Ret: 10*350 + 7})
		}, porcupine.Illegal},
		{"oldFenceRejected", func(ops []histOp) []histOp {
			return append(ops, histOp{Op: 'W', Key: "k", Client: "late", Fence: 7, Call: 10*350 + 6, Ret: 10*350 + 7})
		}, porcupine.Ok},
		{"acquiresOutOfOrder", func(ops []histOp) []histOp {
			a, b := at(ops, 320, 'A'), at(ops, 321, 'A')
			a.Fence, b.Fence = b.Fence, a.Fence
			at(ops, 320, 'W').Fence, at(ops, 321, 'W').Fence = a.Fence, b.Fence
			return ops
		}, porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops := tc.edit(long())
			pieces := partitionLock(porcupineOps(ops))
			if len(pieces) < 5 {
				t.Fatalf("%d operations cut into %d pieces, want at least 5", len(ops), len(pieces))
			}
			if got := linearizable(ops, 1); got != tc.want {
				t.Errorf("porcupine on %d pieces = %s, want %s", len(pieces), got, tc.want)
			}
			whole := lockModel(1, ops)
			whole.Partition = nil
			if got := porcupine.CheckOperationsTimeout(whole, porcupineOps(ops), time.Minute); got != tc.want {
				t.Errorf("porcupine on one piece = %s, want %s", got, tc.want)
			}
		})
	}
}
