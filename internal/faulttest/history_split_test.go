package faulttest

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// splitPiece is the fewest operations a piece of a key's history holds
// before splitQuiet cuts it: small enough that porcupine's work per piece
// (a bitset of the piece's operations copied and hashed at every step) stays
// small, large enough that the pieces stay few.
const splitPiece = 64

// lockSeed is the first operation of every piece of a key's history but
// the first (see splitQuiet): it sets the model's state, from the initial
// one, to what every linearization of the pieces before it leaves.
type lockSeed struct {
	key string
	at  int64 // the cut before the piece: the seed's call and return
	st  lockState
}

// splitQuiet cuts the operations of one key, ordered by call, into pieces
// that porcupine checks apart, each after a lockSeed. A cut at time c
// needs no operation but acquires in flight at c (called at or before c,
// returning after); a hold may be open across it. Every other operation
// lies wholly before or after c; an acquire in flight goes before the cut
// (its return moved to c) when its fence is below the highest fence
// returned by c, and after it (its call moved to c+1) otherwise. A seed
// states the holders, the highest fence and the store's last accepted
// fence that the pieces before leave; these follow from their operations
// alone whenever they linearize (each client's operations are sequential:
// its last acquire or release decides whether it holds).
//
// Sound: moving a call later or a return earlier only narrows an
// operation, and every point of a piece comes before every point of the
// next (returns at most c, calls at least c+1), so linearizations of the
// pieces, one after the other, linearize the whole history. Complete for
// the lock kinds checked here, since acquires take effect in fence order:
// an acquire whose fence is below one returned by c took effect before c;
// one above every such fence can take effect after c; and a reader at the
// highest fence may have to (its writer may hold across c), while taking
// effect after c keeps it beside the same holders.
func splitQuiet(ops []porcupine.Operation, minPiece int) [][]porcupine.Operation {
	n := len(ops)
	byRet := make([]int, n)
	for i := range byRet {
		byRet[i] = i
	}
	slices.SortStableFunc(byRet, func(a, b int) int { return cmp.Compare(ops[a].Return, ops[b].Return) })
	byCall := make([]int, n)
	copy(byCall, byRet)
	slices.SortStableFunc(byCall, func(a, b int) int { return cmp.Compare(ops[a].Call, ops[b].Call) })

	var (
		pieces   [][]porcupine.Operation
		carry    []porcupine.Operation // called, not yet in a piece
		seed     *lockSeed
		started  int
		open     int   // operations other than acquires called and not returned
		maxFence int64 // the highest fence of an acquire returned
	)
	for j, d := range byRet {
		c := ops[d].Return
		for started < n && ops[byCall[started]].Call <= c {
			o := ops[byCall[started]]
			carry = append(carry, o)
			if o.Input.(histOp).Op != 'A' {
				open++
			}
			started++
		}
		if in := ops[d].Input.(histOp); in.Op == 'A' {
			maxFence = max(maxFence, in.Fence)
		} else {
			open--
		}
		if j+1 < n && ops[byRet[j+1]].Return == c {
			continue // not every operation returning at c is counted yet
		}
		if open != 0 || len(carry) < minPiece || started == n {
			continue
		}
		var piece, rest []porcupine.Operation
		if seed != nil {
			piece = append(piece, porcupine.Operation{Input: *seed, Call: seed.at, Return: seed.at})
		}
		for _, o := range carry {
			switch {
			case o.Return <= c:
			case o.Input.(histOp).Fence < maxFence:
				o.Return = c
			default:
				o.Call = c + 1
				rest = append(rest, o)
				continue
			}
			piece = append(piece, o)
		}
		pieces = append(pieces, piece)
		seed = &lockSeed{key: ops[d].Input.(histOp).Key, at: c, st: seedAfter(seed, piece)}
		carry = rest
	}
	var piece []porcupine.Operation
	if seed != nil {
		piece = append(piece, porcupine.Operation{Input: *seed, Call: seed.at, Return: seed.at})
	}
	return append(pieces, append(piece, carry...))
}

// seedAfter is the state every linearization of piece (which starts with
// seed, if any) ends in.
func seedAfter(seed *lockSeed, piece []porcupine.Operation) lockState {
	var st lockState
	if seed != nil {
		st = seed.st
	}
	holders := map[string]holder{}
	for _, h := range st.holders {
		holders[h.client] = h
	}
	ops := make([]histOp, 0, len(piece))
	for _, o := range piece {
		if in, ok := o.Input.(histOp); ok {
			in.Call = o.Call
			ops = append(ops, in)
		}
	}
	slices.SortStableFunc(ops, func(a, b histOp) int { return cmp.Compare(a.Call, b.Call) })
	for _, o := range ops {
		switch o.Op {
		case 'A':
			holders[o.Client] = holder{o.Client, o.Mode, o.Fence}
			st.maxFence = max(st.maxFence, o.Fence)
		case 'R':
			delete(holders, o.Client)
		case 'W':
			if o.OK {
				st.accepted = max(st.accepted, o.Fence)
			}
		}
	}
	st.holders = nil
	for _, h := range holders {
		st.holders = append(st.holders, h)
	}
	slices.SortFunc(st.holders, func(a, b holder) int { return strings.Compare(a.client, b.client) })
	return st
}

// partitionLock splits a history by key, then each key's operations at
// quiet points (splitQuiet).
func partitionLock(h []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[string][]porcupine.Operation{}
	var keys []string
	for _, o := range h {
		k := o.Input.(histOp).Key
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], o)
	}
	var out [][]porcupine.Operation
	for _, k := range keys {
		out = append(out, splitQuiet(byKey[k], splitPiece)...)
	}
	return out
}

// describeSeed is a seed as the visualization shows it.
func describeSeed(s lockSeed) string {
	return fmt.Sprintf("%s: state after the cut at %d: holders %v, max fence %d, store at %d",
		s.key, s.at, s.st.holders, s.st.maxFence, s.st.accepted)
}
