package lock

import "github.com/agentlock/lock/internal/luascripts"

// keySlot returns the Redis Cluster hash slot of a Redis key
// (luascripts.KeySlot).
func keySlot(key string) int { return luascripts.KeySlot(key) }
