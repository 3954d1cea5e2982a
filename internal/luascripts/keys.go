package luascripts

// Keys names the Redis keys of one lock: the storage layout every lock kind
// uses, on every node. For the caller's key K and prefix P:
//
//	P{K}          the lock: a token, or a hash owner→count for re-entrant holds
//	P{K}:fence    the fencing counter
//	P{K}:notify   the channel a release publishes on
//	P{K}:notify:<id>  a Client's inbox: a fair release's message for one of
//	              its waiters (fair_queue.lua inbox, lease.Notifier.Inbox)
//	P{K}:holders  holder info, when written: a hash, hold token → info
//	P{K}:forced   the tokens of holds a force release removed, while they
//	              would have lasted (forcerelease.lua)
//	P{K}:<name>   further companions (Companion)
//
// All share the hash tag {K}, so every script and transaction stays in one
// cluster slot. The prefix must not contain '{' or '}'.
type Keys struct {
	User string // the caller's key K
	// {lock, fence, lock, notify}, laid out so that the scripts' KEYS are
	// slices of it, built once per lock rather than once per call:
	// names[0:2] is {lock, fence}, names[2:4] {lock, notify}, names[0:1]
	// {lock}.
	names [4]string
}

// NewKeys returns the keys of the lock on key under prefix.
func NewKeys(prefix, key string) Keys {
	// One allocation for all three names: "P{K}:fenceP{K}:notify", sliced.
	n := len(prefix) + len(key) + 2
	s := prefix + "{" + key + "}:fence" + prefix + "{" + key + "}:notify"
	return Keys{User: key, names: [4]string{s[:n], s[:n+6], s[:n], s[n+6:]}}
}

// Lock is P{K}, the lock itself.
func (k *Keys) Lock() string { return k.names[0] }

// Fence is P{K}:fence, the fencing counter.
func (k *Keys) Fence() string { return k.names[1] }

// Notify is P{K}:notify, the channel a release publishes on.
func (k *Keys) Notify() string { return k.names[3] }

// Companion is P{K}:name, a further key of the same lock.
func (k *Keys) Companion(name string) string { return k.names[0] + ":" + name }

// AcquireKeys are the KEYS of acquire.lua, handoff.lua and fence_raise.lua:
// {lock, fence}.
func (k *Keys) AcquireKeys() []string { return k.names[0:2] }

// ReleaseKeys are the KEYS of release.lua: {lock, notify}.
func (k *Keys) ReleaseKeys() []string { return k.names[2:4] }

// LockKeys are the KEYS of extend.lua and pttl.lua: {lock}.
func (k *Keys) LockKeys() []string { return k.names[0:1] }

// Holders is P{K}:holders, the holder info of the lock's holds, when they
// write it: a hash from hold token to the text acquire.lua describes. Built
// on each call, so that locks without holder info pay nothing for it.
func (k *Keys) Holders() string { return k.Companion("holders") }

// InfoAcquireKeys are the KEYS of acquire.lua and handoff.lua writing holder
// info, and of inspect.lua: {lock, fence, holders}.
func (k *Keys) InfoAcquireKeys() []string { return []string{k.Lock(), k.Fence(), k.Holders()} }

// InfoReleaseKeys are the KEYS of release.lua dropping holder info too:
// {lock, notify, holders}.
func (k *Keys) InfoReleaseKeys() []string { return []string{k.Lock(), k.Notify(), k.Holders()} }

// InfoLockKeys are the KEYS of extend.lua keeping holder info alive with
// the hold: {lock, holders}.
func (k *Keys) InfoLockKeys() []string { return []string{k.Lock(), k.Holders()} }

// Forced is P{K}:forced, the set of the tokens of holds that a force
// release removed, kept while those holds would have lasted: a holder that
// missed the release's message learns from it that its hold was forced.
func (k *Keys) Forced() string { return k.Companion("forced") }

// ForceKeys are the KEYS of forcerelease.lua: {lock, notify, holders,
// forced}.
func (k *Keys) ForceKeys() []string {
	return []string{k.Lock(), k.Notify(), k.Holders(), k.Forced()}
}
