// Package faulttest holds the fault suite: the lock under process kills,
// pauses, Redis restarts, network faults (toxiproxy, in-process), Sentinel
// and Cluster failovers, replica acknowledgements, least-privilege ACLs and
// TLS, against real redis-server processes. It is its own module so that
// toxiproxy never enters the root go.mod.
//
// Run it with
//
//	go test -race -count=1 ./...
//
// Every scenario logs its measurements as one line,
//
//	FIGURE scenario=<name> key=value ...
//
// and appends them to the file named by FAULTTEST_FIGURES when it is set;
// docs/design/fault-figures.md quotes them. Repros of known core bugs run only with
// FAULTTEST_CORE_BUGS=1.
package faulttest
