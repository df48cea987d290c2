package main

import (
	"io"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-nats-relay/kube-nats-relay/internal/testenv"
)

// partitionProxy forwards TCP connections to an address until partitioned: then it cuts every
// connection it carries and closes new ones at once, until healed. Between the relay and the
// apiserver it is a network partition that leaves the rest of the test bed alone.
type partitionProxy struct {
	*testenv.Proxy
}

func startPartitionProxy(t *testing.T, target string) *partitionProxy {
	t.Helper()
	return startProxy(t, target, nil)
}

// startProxy starts a partitionProxy whose client-to-target copy is upstream (nil: io.Copy).
func startProxy(t *testing.T, target string, upstream func(dst io.Writer, src io.Reader) error) *partitionProxy {
	t.Helper()
	p, err := testenv.StartFilterProxy(target, upstream)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	t.Cleanup(p.Close)
	return &partitionProxy{Proxy: p}
}

func (p *partitionProxy) addr() string { return p.Addr() }

// partition cuts every connection and refuses new ones.
func (p *partitionProxy) partition() { p.Cut() }

// heal lets new connections through again.
func (p *partitionProxy) heal() { p.Restore() }

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
