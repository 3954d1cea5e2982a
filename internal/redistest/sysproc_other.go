//go:build unix && !linux

package redistest

import "syscall"

// sysProcAttr puts the child in its own process group. Pdeathsig exists only
// on Linux, so elsewhere a killed test binary may leave servers behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
