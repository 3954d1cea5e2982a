package lease

// holdHeap orders holds by next, earliest first.
type holdHeap []*Hold

func (q holdHeap) Len() int           { return len(q) }
func (q holdHeap) Less(i, j int) bool { return q[i].next < q[j].next }
func (q holdHeap) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = int32(i), int32(j)
}
func (q *holdHeap) Push(x any) {
	h := x.(*Hold)
	h.index = int32(len(*q))
	*q = append(*q, h)
}
func (q *holdHeap) Pop() any {
	old := *q
	h := old[len(old)-1]
	old[len(old)-1] = nil
	h.index = -1
	*q = old[:len(old)-1]
	return h
}
