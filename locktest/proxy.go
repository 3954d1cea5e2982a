package locktest

import (
	"net"
	"sync"
	"time"
)

// proxy is an in-process TCP proxy in front of the embedded Redis. It can
// cut every connection and refuse service (down), or hold back each chunk
// the server sends by a delay, so that the client under test meets real
// network faults: broken connections, redials, late replies.
type proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	down    bool
	delay   time.Duration
	changed chan struct{} // closed and replaced whenever down or delay changes
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
}

// newProxy listens on a free loopback port and forwards to target.
func newProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target, changed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Go(func() { p.forward(c) })
	}
}

// forward connects c to the target and copies both ways until either side
// ends or the proxy cuts them. While the proxy is down, c is closed at once:
// the client's dial succeeds and its first read fails, as after a reset.
func (p *proxy) forward(c net.Conn) {
	var s net.Conn
	if !p.down0() {
		s, _ = net.Dial("tcp", p.target)
	}
	if s == nil || !p.track(c, s) {
		c.Close()
		if s != nil {
			s.Close()
		}
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { p.copy(s, c, false) })
	p.copy(c, s, true)
	wg.Wait()
	p.untrack(c, s)
}

func (p *proxy) down0() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.down || p.closed
}

// track registers a live pair, unless the proxy went down or closed since
// the pair was accepted.
func (p *proxy) track(c, s net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down || p.closed {
		return false
	}
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	return true
}

func (p *proxy) untrack(c, s net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

// copy moves bytes from src to dst; replies (toClient) wait out the delay
// first. When either side fails, both are closed, which ends the other
// direction too.
func (p *proxy) copy(dst, src net.Conn, toClient bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if toClient && !p.hold(time.Now()) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// hold waits until the delay in force has passed since arrived, following
// changes to it (Restore lets everything through at once). It reports false
// when the proxy went down or closed meanwhile.
func (p *proxy) hold(arrived time.Time) bool {
	for {
		p.mu.Lock()
		d, changed, ok := p.delay, p.changed, !p.down && !p.closed
		p.mu.Unlock()
		if !ok {
			return false
		}
		wait := time.Until(arrived.Add(d))
		if wait <= 0 {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-changed:
		}
		t.Stop()
	}
}

// set changes the proxy's state under its lock, wakes every held reply to
// look again, and, when it goes down, cuts every live connection.
func (p *proxy) set(down bool, delay time.Duration) {
	p.mu.Lock()
	p.down, p.delay = down, delay
	close(p.changed)
	p.changed = make(chan struct{})
	var cut []net.Conn
	if down {
		for c := range p.conns {
			cut = append(cut, c)
		}
	}
	p.mu.Unlock()
	for _, c := range cut {
		c.Close()
	}
}

// close stops the listener, cuts every connection and waits for every
// goroutine of the proxy.
func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.set(true, 0)
	p.ln.Close()
	p.wg.Wait()
}
