package testenv

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// Proxy forwards TCP connections from a loopback port to a target address until Cut: then it
// closes every connection it carries and closes new ones at once, until Restore. Between two
// servers it is a network partition that leaves everything else alone: a leaf node's link to
// its hub, a relay's connection to the apiserver.
type Proxy struct {
	l      net.Listener
	target string
	// upstream copies what a client sends to the target; nil is io.Copy.
	upstream func(dst io.Writer, src io.Reader) error

	mu      sync.Mutex
	cut     bool
	refused int
	conns   map[net.Conn]struct{}
}

// StartProxy starts a Proxy to target (host:port) on a free loopback port.
func StartProxy(target string) (*Proxy, error) { return StartFilterProxy(target, nil) }

// StartFilterProxy is StartProxy whose copy from client to target is upstream (nil:
// io.Copy), for a proxy that reads or changes what clients send.
func StartFilterProxy(target string, upstream func(dst io.Writer, src io.Reader) error) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy to %s: %w", target, err)
	}
	p := &Proxy{l: l, target: target, upstream: upstream, conns: make(map[net.Conn]struct{})}
	go p.serve()
	return p, nil
}

// Addr is the host:port the proxy listens on.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// Cut closes every connection the proxy carries and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Refused is how many connections the proxy closed at once because it was cut.
func (p *Proxy) Refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

// Restore lets new connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Close stops listening and cuts every connection for good.
func (p *Proxy) Close() {
	p.l.Close()
	p.Cut()
}

func (p *Proxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *Proxy) forward(c net.Conn) {
	p.mu.Lock()
	cut := p.cut
	if cut {
		p.refused++
	}
	p.mu.Unlock()
	if cut {
		c.Close()
		return
	}
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.refused++
		p.mu.Unlock()
		c.Close()
		u.Close()
		return
	}
	p.conns[c], p.conns[u] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() {
		if p.upstream != nil {
			_ = p.upstream(u, c)
		} else {
			_, _ = io.Copy(u, c)
		}
		done <- struct{}{}
	}()
	go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
	<-done
	c.Close()
	u.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, u)
	p.mu.Unlock()
}
