package lease

// holdHeap orders holds by next, earliest first: a 4-ary min-heap whose
// entries carry a copy of their hold's next. A renewal tick pops every due
// hold of a Client (100 000 in S7), and sifting then compares entries side
// by side in the slice instead of reading a Hold per comparison; four
// children per node halve the levels, and so the Holds whose index a sift
// rewrites. Whoever changes the next of a hold in the heap calls fix.
type holdHeap []heapEntry

// heapEntry is one hold in the heap, with its next as of its last push or
// fix.
type heapEntry struct {
	next int64
	h    *Hold
}

// set puts x at i and tells its hold.
func (q holdHeap) set(i int, x heapEntry) {
	q[i] = x
	x.h.index = int32(i)
}

// push adds h, ordered by its next.
func (q *holdHeap) push(h *Hold) {
	*q = append(*q, heapEntry{h.next, h})
	q.up(len(*q) - 1)
}

// pop removes and returns the hold with the earliest next; the heap must
// not be empty.
func (q *holdHeap) pop() *Hold { return q.remove(0) }

// remove takes out the hold at i and returns it; its index becomes -1.
func (q *holdHeap) remove(i int) *Hold {
	old := *q
	h := old[i].h
	last := len(old) - 1
	moved := old[last]
	old[last] = heapEntry{}
	*q = old[:last]
	if i != last {
		(*q).set(i, moved)
		q.fix(i)
	}
	h.index = -1
	return h
}

// fix restores the order after the next of the hold at i changed.
func (q holdHeap) fix(i int) {
	q[i].next = q[i].h.next
	if !q.down(i) {
		q.up(i)
	}
}

func (q holdHeap) up(i int) {
	x := q[i]
	for i > 0 {
		p := (i - 1) / 4
		if q[p].next <= x.next {
			break
		}
		q.set(i, q[p])
		i = p
	}
	q.set(i, x)
}

// down sifts the entry at i towards the leaves; it reports whether it
// moved.
func (q holdHeap) down(i int) bool {
	x, start, n := q[i], i, len(q)
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for j := c + 1; j < min(c+4, n); j++ {
			if q[j].next < q[m].next {
				m = j
			}
		}
		if q[m].next >= x.next {
			break
		}
		q.set(i, q[m])
		i = m
	}
	q.set(i, x)
	return i > start
}
