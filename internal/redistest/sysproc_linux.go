package redistest

import "syscall"

// sysProcAttr puts the child in its own process group, so a signal to the
// test's group does not reach it twice, and has the kernel SIGKILL it when
// the thread that started it dies, so no server outlives a killed test binary.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
