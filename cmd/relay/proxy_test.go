package main

import (
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// partitionProxy forwards TCP connections to an address until partitioned: then it cuts every
// connection it carries and closes new ones at once, until healed. Between the relay and the
// apiserver it is a network partition that leaves the rest of the test bed alone.
type partitionProxy struct {
	l      net.Listener
	target string

	// upstream copies what a client sends to the target; nil is io.Copy.
	upstream func(dst io.Writer, src io.Reader) error

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

func startPartitionProxy(t *testing.T, target string) *partitionProxy {
	t.Helper()
	return startProxy(t, target, nil)
}

// startProxy starts a partitionProxy whose client-to-target copy is upstream (nil: io.Copy).
func startProxy(t *testing.T, target string, upstream func(dst io.Writer, src io.Reader) error) *partitionProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &partitionProxy{l: l, target: target, upstream: upstream, conns: make(map[net.Conn]struct{})}
	go p.serve()
	t.Cleanup(func() { l.Close(); p.partition() })
	return p
}

func (p *partitionProxy) addr() string { return p.l.Addr().String() }

func (p *partitionProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *partitionProxy) forward(c net.Conn) {
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
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

// partition cuts every connection and refuses new ones.
func (p *partitionProxy) partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// heal lets new connections through again.
func (p *partitionProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// kubeconfigVia writes a copy of the test bed's kubeconfig that reaches the apiserver at
// server, and returns its path.
func kubeconfigVia(t *testing.T, server string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(env.Kube.KubeconfigPath())
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	for _, c := range cfg.Clusters {
		c.Server = server
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	return path
}
