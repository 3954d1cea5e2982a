package redistest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// stopGrace is how long a graceful stop waits after SIGTERM before SIGKILL.
const stopGrace = 3 * time.Second

// proc is one redis-server process and the goroutine that reaps it.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when Wait has returned
	err  error         // Wait's result; read only after done is closed
}

// spawn starts redis-server with argv in dir. Its stdout and stderr, where
// redis-server reports errors it meets before opening its log file, go to
// stdoutName in dir. One goroutine waits for the process and ends with it.
func spawn(dir string, argv []string) (*proc, error) {
	out, err := os.OpenFile(filepath.Join(dir, stdoutName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("redistest: open stdout file: %w", err)
	}
	defer out.Close() // the child holds its own copy

	cmd := exec.Command(serverBin, argv...)
	cmd.Dir = dir
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("redistest: start %s: %w", serverBin, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// pid returns the process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has exited and been reaped.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process by pid. Once the process has been reaped
// os.Process refuses to signal, so a recycled pid is never hit.
func (p *proc) signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("redistest: signal %v to pid %d: %w", sig, p.pid(), err)
	}
	return nil
}

// kill sends SIGKILL and waits until the process has been reaped.
func (p *proc) kill() {
	_ = p.signal(syscall.SIGKILL) // fails only if it already exited
	<-p.done
}

// terminate sends SIGTERM, and SIGCONT in case the process is paused, waits
// up to grace for it to exit, then kills it.
func (p *proc) terminate(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.signal(syscall.SIGTERM)
	_ = p.signal(syscall.SIGCONT)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.kill()
	}
}
