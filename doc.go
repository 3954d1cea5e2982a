// Package lock provides Redis-based distributed locks.
package lock
