package admin

// Info is what [Admin.Inspect] and [Admin.List] report of one lock, read
// in one script call, so its fields agree with each other.
type Info struct {
	Key string // the caller's key
	// Kind is the kind of lock held at the key, as its Redis value tells:
	// "mutex" (also a fair lock, whose holder is a plain mutex hold, a
	// multi-lock's member and Once's lock), "rwlock" (a read-write lock:
	// its readers, or its one writer), "semaphore" (one holder per permit
	// out), "election" (one holder, the leader: its Fence is its term,
	// its Metadata the leader's value, its Since when the term began) or
	// "limiter" (a rate limiter: no holders; its state is the lock
	// package's Limiter.Available); "" for a free key.
	Kind string
	// Holders has one entry per live hold: a re-entrant mutex one per nested
	// hold, a read-write lock one per reader (or its writer), a semaphore
	// one per permit, each with its own TTL left. Holds past their expiry
	// that Redis has not dropped yet are not shown.
	Holders []Holder
	// Waiters counts the live entries of a fair lock's queue (the lock
	// package's WithFair): the Acquires waiting for the key, in every
	// process, whose place has not expired. It is 0 for other kinds, whose
	// waiters leave no entry in Redis (see [Admin.Listeners]).
	Waiters int
	// Fence is the current fence: the holds' fence, else the key's fencing
	// counter; 0 when there is none.
	Fence int64
}
