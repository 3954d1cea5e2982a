package luascripts

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed fence_raise.lua
var fenceRaiseBody string

var fenceRaiseSrc = fenceSrc + fenceRaiseBody

// FenceRaise lifts a node's fencing counter to at least a given fence while
// the lock still holds the caller's token; redlock uses it so that a quorum
// of nodes holds the fence it hands out. See fence_raise.lua.
var FenceRaise = redis.NewScript(fenceRaiseSrc)

//go:embed undo.lua
var undoHead string

var undoSrc = undoHead + releaseSrc

// Undo deletes a redlock token on a node whose acquire call of it went
// unanswered, leaving a tombstone that refuses that acquire should it land
// later. See undo.lua; its reply is Release's.
var Undo = redis.NewScript(undoSrc)

// Undone is P{K}:undone:<token>, the tombstone Undo leaves for token.
func (k *Keys) Undone(token string) string { return k.Lock() + ":undone:" + token } // one allocation

// TombstoneAcquireKeys are the KEYS of acquire.lua for a redlock attempt
// with token: {lock, fence, holders, tombstone}; holders is unused (no
// holder info), there so that the tombstone is KEYS[4].
func (k *Keys) TombstoneAcquireKeys(token string) []string {
	return []string{k.Lock(), k.Fence(), k.Holders(), k.Undone(token)}
}

// UndoKeys are the KEYS of undo.lua for token: {lock, notify, tombstone}.
func (k *Keys) UndoKeys(token string) []string {
	return []string{k.Lock(), k.Notify(), k.Undone(token)}
}
