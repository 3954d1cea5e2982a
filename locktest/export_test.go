package locktest

import "github.com/agentlock/lock"

// NewOn is New on the Redis at addr (a real redis-server in the tests that
// check the Controller against one); Miniredis() is nil.
func NewOn(t TB, addr string, opts ...lock.Option) (*lock.Client, *Controller) {
	return newOn(t, addr, opts)
}
