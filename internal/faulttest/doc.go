// Package faulttest holds the fault suite: the lock under process kills,
// pauses, restarts and network faults, against real redis-server processes.
// It is its own module so that toxiproxy never enters the root go.mod.
package faulttest
