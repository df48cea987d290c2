package natstest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"
)

const (
	// Ready bounds the start of a server and the link of a leaf to its hub: milliseconds
	// usually, seconds on a busy machine.
	Ready = 30 * time.Second
	// linkPoll is how often HubAndLeaves asks whether every leaf is linked; a link takes
	// tens of milliseconds.
	linkPoll = 20 * time.Millisecond
	// HubDomain is the JetStream domain, and the server name, of HubAndLeaves' hub.
	HubDomain = "hub"
)

// Start starts an in-process nats-server with opts (nil for none) for the test t, with
// JetStream, no logging and no signal handlers, and where opts leaves them unset, on
// 127.0.0.1, a random port and a temporary store directory. Start keeps opts: the server
// writes its random ports back into it (LeafNode.Port, for one).
func Start(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	if opts == nil {
		opts = &server.Options{}
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Port == 0 {
		opts.Port = server.RANDOM_PORT
	}
	if opts.StoreDir == "" {
		opts.StoreDir = t.TempDir()
	}
	opts.JetStream, opts.NoLog, opts.NoSigs = true, true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("nats-server %s: %v", opts.ServerName, err)
	}
	go s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(Ready) {
		t.Fatalf("nats-server %s: not ready after %s", opts.ServerName, Ready)
	}
	return s
}

// ParseConfig returns the options of conf, a nats-server configuration block (such as
// testenv.NATSAuth.ServerConfig), read from a file as nats-server reads its own.
func ParseConfig(t testing.TB, conf string) *server.Options {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("nats-server configuration: %v", err)
	}
	return opts
}

// Connect returns a client connection to s, closed when the test ends.
func Connect(t testing.TB, s *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatalf("connect to nats-server %s: %v", s.Name(), err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// HubAndLeaves starts a hub server, named and in JetStream domain HubDomain, with a leaf
// node listener on a random port, and one leaf server per domain of leafDomains, named
// after it and in it, with a remote to the hub. It returns once every leaf's JetStream
// domain answers through the hub, the leaves by domain.
func HubAndLeaves(t testing.TB, leafDomains ...string) (hub *server.Server, leaves map[string]*server.Server) {
	t.Helper()
	hubOpts := &server.Options{ServerName: HubDomain, JetStreamDomain: HubDomain,
		LeafNode: server.LeafNodeOpts{Host: "127.0.0.1", Port: server.RANDOM_PORT}}
	hub = Start(t, hubOpts)
	remote, err := url.Parse(fmt.Sprintf("nats-leaf://127.0.0.1:%d", hubOpts.LeafNode.Port))
	if err != nil {
		t.Fatal(err)
	}
	leaves = make(map[string]*server.Server, len(leafDomains))
	for _, d := range leafDomains {
		leaves[d] = Start(t, &server.Options{ServerName: d, JetStreamDomain: d,
			LeafNode: server.LeafNodeOpts{Remotes: []*server.RemoteLeafOpts{{URLs: []*url.URL{remote}}}}})
	}
	nc, err := nats.Connect(hub.ClientURL())
	if err != nil {
		t.Fatalf("connect to the hub: %v", err)
	}
	defer nc.Close()
	var unlinked string
	err = wait.PollUntilContextTimeout(context.Background(), linkPoll, Ready, true, func(ctx context.Context) (bool, error) {
		for _, d := range leafDomains {
			if !domainAnswers(ctx, nc, d) {
				unlinked = d
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("leaf %s: JetStream domain not reachable through the hub after %s: %v", unlinked, Ready, err)
	}
	return hub, leaves
}

// domainAnswers reports whether JetStream in domain answers on nc.
func domainAnswers(ctx context.Context, nc *nats.Conn, domain string) bool {
	js, err := jetstream.NewWithDomain(nc, domain)
	if err != nil {
		return false
	}
	info, err := js.AccountInfo(ctx)
	return err == nil && info.Domain == domain
}
