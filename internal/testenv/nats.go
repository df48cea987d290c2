package testenv

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// NATSOptions tune a nats-server.
type NATSOptions struct {
	// MaxPayload overrides the server's max_payload (1 MiB by default), in bytes.
	MaxPayload int
	// Auth is a nats-server configuration block appended verbatim to the configuration file:
	// authorization, operator and resolver, or tls. Empty leaves the server open to every
	// client. NATSAuth.ServerConfig holds one (see NewNKeyAuth and its siblings).
	Auth string
	// Domain is the server's JetStream domain; empty leaves it unset.
	Domain string
	// Extra is more configuration appended verbatim after Auth: accounts, leafnodes.
	Extra string
	// Env holds NAME=value pairs added to the server's environment, which it resolves
	// $NAME in its configuration from (passwords kept out of the file).
	Env []string
}

// NATSServer is a nats-server process with JetStream and file storage. It can be killed with
// SIGKILL and started again on the same port with the same storage.
type NATSServer struct {
	name     string
	dir      string
	url      string
	monitor  string
	proc     *process
	monitorC *http.Client
}

// StartNATS starts a single nats-server with JetStream, its state under dir, and waits until
// JetStream is ready.
func StartNATS(ctx context.Context, dir string, opts NATSOptions) (*NATSServer, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	s, err := newNATSServer(dir, "nats-0", ports[0], ports[1], "", opts)
	if err != nil {
		return nil, err
	}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func newNATSServer(dir, name string, port, monitorPort int, cluster string, opts NATSOptions) (*NATSServer, error) {
	bin, err := binPath(binNATSServer)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var conf strings.Builder
	fmt.Fprintf(&conf, "server_name: %q\nlisten: \"127.0.0.1:%d\"\nhttp: \"127.0.0.1:%d\"\n", name, port, monitorPort)
	fmt.Fprintf(&conf, "jetstream {\n  store_dir: %q\n", filepath.Join(dir, "jetstream"))
	if opts.Domain != "" {
		fmt.Fprintf(&conf, "  domain: %s\n", opts.Domain)
	}
	conf.WriteString("}\n")
	if opts.MaxPayload > 0 {
		fmt.Fprintf(&conf, "max_payload: %d\n", opts.MaxPayload)
	}
	conf.WriteString(cluster)
	if opts.Auth != "" {
		conf.WriteString(opts.Auth)
		conf.WriteString("\n")
	}
	conf.WriteString(opts.Extra)
	confPath := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(confPath, []byte(conf.String()), 0o600); err != nil {
		return nil, err
	}
	return &NATSServer{
		name:     name,
		dir:      dir,
		url:      fmt.Sprintf("nats://127.0.0.1:%d", port),
		monitor:  fmt.Sprintf("http://127.0.0.1:%d", monitorPort),
		monitorC: &http.Client{Timeout: 5 * time.Second},
		proc: &process{
			name:    "nats-server " + name,
			path:    bin,
			args:    []string{"-c", confPath},
			logPath: filepath.Join(dir, "nats-server.log"),
			env:     opts.Env,
		},
	}, nil
}

// Start starts the server (again, after Kill or Stop) and waits until JetStream is healthy.
func (s *NATSServer) Start(ctx context.Context) error {
	if err := s.proc.start(); err != nil {
		return err
	}
	return s.waitHealthy(ctx)
}

func (s *NATSServer) waitHealthy(ctx context.Context) error {
	return s.proc.waitHTTP(ctx, s.monitorC, s.monitor+"/healthz", nil)
}

// Kill ends the server with SIGKILL, as a crash would; its storage stays for Start.
func (s *NATSServer) Kill() error { return s.proc.kill() }

// Stop ends the server gracefully.
func (s *NATSServer) Stop() error { return s.proc.stop() }

// Running reports whether the server process is running.
func (s *NATSServer) Running() bool { return s.proc.running() }

// URL is the server's client URL.
func (s *NATSServer) URL() string { return s.url }

// MonitorURL is the server's HTTP monitoring URL (/healthz, /varz, /jsz).
func (s *NATSServer) MonitorURL() string { return s.monitor }

// LogPath is the file the server's output (its log) goes to.
func (s *NATSServer) LogPath() string { return s.proc.logPath }

// LogTail returns the end of the server's log, for a failing test to print.
func (s *NATSServer) LogTail() string { return s.proc.tail() }

// StoreDir is the JetStream storage directory, kept across Kill and Start.
func (s *NATSServer) StoreDir() string { return filepath.Join(s.dir, "jetstream") }

// NATSCluster is a cluster of nats-servers with JetStream on loopback, for replicated (R3)
// streams and buckets.
type NATSCluster struct {
	Nodes []*NATSServer
}

// StartNATSCluster starts n clustered nats-servers with state under dir and waits until each
// reports JetStream healthy.
func StartNATSCluster(ctx context.Context, dir string, n int, opts NATSOptions) (c *NATSCluster, err error) {
	return startNATSCluster(ctx, dir, "nats", n, func(int) NATSOptions { return opts })
}

// startNATSCluster starts n clustered nats-servers named prefix-0, prefix-1, ..., node i with
// the options opts(i).
func startNATSCluster(ctx context.Context, dir, prefix string, n int, opts func(i int) NATSOptions) (c *NATSCluster, err error) {
	ports, err := freePorts(3 * n)
	if err != nil {
		return nil, err
	}
	routes := make([]string, n)
	for i := range n {
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", ports[3*i+2])
	}
	cl := &NATSCluster{}
	defer func() {
		if err != nil {
			cl.Stop()
		}
	}()
	c = cl
	for i := range n {
		cluster := fmt.Sprintf("cluster {\n  name: testenv\n  listen: \"127.0.0.1:%d\"\n  routes: [%s]\n}\n",
			ports[3*i+2], strings.Join(routes, ", "))
		name := fmt.Sprintf("%s-%d", prefix, i)
		s, err := newNATSServer(filepath.Join(dir, name), name, ports[3*i], ports[3*i+1], cluster, opts(i))
		if err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	// Start all before waiting: JetStream in a cluster is healthy only once a meta leader is
	// elected, which needs a quorum of nodes up.
	for _, s := range c.Nodes {
		if err := s.proc.start(); err != nil {
			return nil, err
		}
	}
	for _, s := range c.Nodes {
		if err := s.waitHealthy(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// URLs is the comma-separated client URL list of all nodes, as NATS clients accept it.
func (c *NATSCluster) URLs() string {
	urls := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		urls[i] = s.URL()
	}
	return strings.Join(urls, ",")
}

// Stop ends every node.
func (c *NATSCluster) Stop() {
	for _, s := range c.Nodes {
		_ = s.Stop()
	}
}
