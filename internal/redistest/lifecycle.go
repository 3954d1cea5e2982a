package redistest

import (
	"fmt"
	"os"
	"syscall"
)

// Kill sends SIGKILL to the server's process and waits until it has been
// reaped. It does nothing if the process has already exited. The directory
// stays, so [Server.Restart] can start the server again.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc.kill()
}

// Stop stops the server for good: SIGTERM (and SIGCONT, in case it is
// paused), up to 3s for it to exit, then SIGKILL. It then removes the
// directory if StartServer created it. Stop is idempotent and safe after
// [Server.Kill]; later Restart calls fail.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.stopped = true
	s.proc.terminate(stopGrace)
	if s.ownDir {
		_ = os.RemoveAll(s.dir)
	}
}

// Pause stops the process with SIGSTOP: connections stay open but nothing
// answers until [Server.Resume]. It fails if the process is not running.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume continues a paused process with SIGCONT. It fails if the process
// is not running.
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.proc.exited() {
		return fmt.Errorf("redistest: signal %v to %s: not running", sig, s.ep.addr)
	}
	return s.proc.signal(sig)
}

// Restart starts a new process on the same port with the same arguments
// and waits until it answers. A running process is first stopped as Stop
// does. The new server is empty, as nothing is persisted, except that a
// cluster node keeps its nodes.conf and a sentinel its rewritten config.
// Restart fails after [Server.Stop], or with the log tail if the new
// process does not become ready.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return fmt.Errorf("redistest: restart %s: server stopped", s.ep.addr)
	}
	s.proc.terminate(stopGrace)
	p, err := spawn(s.dir, s.argv)
	if err != nil {
		return err
	}
	s.proc = p
	if err := waitReady(p, s.ep, s.readyTimeout); err != nil {
		p.kill()
		return fmt.Errorf("redistest: restart %s: %w\n%s", s.ep.addr, err, logTail(s.dir, 20))
	}
	return nil
}
