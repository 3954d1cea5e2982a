package lease

import (
	"math/rand/v2"
	"testing"
)

// checkHeap fails unless every entry is ordered after its parent, carries
// its hold's next, and is where its hold's index says.
func checkHeap(t *testing.T, q holdHeap) {
	t.Helper()
	for i, x := range q {
		if x.next != x.h.next {
			t.Fatalf("entry %d: next = %d, its hold's = %d", i, x.next, x.h.next)
		}
		if int(x.h.index) != i {
			t.Fatalf("entry %d: its hold's index = %d", i, x.h.index)
		}
		if i > 0 && q[(i-1)/4].next > x.next {
			t.Fatalf("entry %d (next %d) before its parent (next %d)", i, x.next, q[(i-1)/4].next)
		}
	}
}

func TestHoldHeap_pushPopRemoveFix(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var q holdHeap
	for step := range 5000 {
		switch op := r.IntN(6); {
		case op <= 2 || len(q) == 0:
			h := &Hold{next: r.Int64N(1000), index: -1}
			q.push(h)
		case op == 3:
			min := q[0].next
			h := q.pop()
			if h.next != min || h.index != -1 {
				t.Fatalf("step %d: pop = next %d index %d, want next %d index -1", step, h.next, h.index, min)
			}
			for _, x := range q {
				if x.next < min {
					t.Fatalf("step %d: popped %d with %d left", step, min, x.next)
				}
			}
		case op == 4:
			h := q[r.IntN(len(q))].h
			if got := q.remove(int(h.index)); got != h || h.index != -1 {
				t.Fatalf("step %d: remove returned another hold, or left index %d", step, h.index)
			}
		default:
			h := q[r.IntN(len(q))].h
			h.next = r.Int64N(1000)
			q.fix(int(h.index))
		}
		checkHeap(t, q)
	}
}
