package lock

import "strconv"

// ReleaseMode selects how a lock talks to Redis; see [WithReleaseMode].
type ReleaseMode int

const (
	// ReleaseScript runs every operation as one Lua script: one round trip to
	// acquire, one to release. The default.
	ReleaseScript ReleaseMode = iota
	// ReleaseWatch runs no script at all, for servers where scripting is
	// denied: acquire is SET NX PX with the fence INCR in one MULTI; release,
	// extend and renewal use WATCH/GET/MULTI/EXEC, retried on conflict.
	ReleaseWatch
)

// String names the mode.
func (m ReleaseMode) String() string {
	switch m {
	case ReleaseScript:
		return "script"
	case ReleaseWatch:
		return "watch"
	}
	return "ReleaseMode(" + strconv.Itoa(int(m)) + ")"
}
