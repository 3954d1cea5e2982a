// Package redlock holds the network-fault tests of the quorum lock
// (github.com/agentlock/lock/redlock): five real redis-server processes, one
// or more of them behind an in-process toxiproxy proxy.
package redlock
